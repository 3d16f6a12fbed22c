#include "server/api_error.h"

#include <nlohmann/json.hpp>

#include "server/json_text.h"

namespace tokamak::server {

const char* error_type_for_status(int status) {
  switch (status) {
    case 400:
    case 405:
    case 408:
    case 413:
    case 431:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 429:
      return "rate_limit_error";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

ApiError::ApiError(int status, const std::string& message, std::string param, std::string code,
                   HttpHeaders headers)
    : Error(message),
      status_(status),
      type_(error_type_for_status(status)),
      param_(std::move(param)),
      code_(std::move(code)),
      headers_(std::move(headers)) {}

std::string error_body(const std::string& message, const std::string& type,
                       const std::string& param, const std::string& code) {
  nlohmann::json error = {{"message", message},
                          {"type", type},
                          {"param", param.empty() ? nlohmann::json() : nlohmann::json(param)},
                          {"code", code.empty() ? nlohmann::json() : nlohmann::json(code)}};
  return to_json_text(nlohmann::json{{"error", std::move(error)}});
}

HttpResponse error_response(const ApiError& error) {
  HttpResponse response;
  response.status = error.status();
  response.headers = error.headers();
  response.body = error_body(error.what(), error.type(), error.param(), error.code());
  return response;
}

HttpResponse error_response(int status, const std::string& message) {
  return error_response(ApiError(status, message));
}

}  // namespace tokamak::server

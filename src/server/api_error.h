#pragma once
// ApiError: a request the server refuses, answered in OpenAI's error shape:
//   HTTP <status>  {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
// Thrown by request parsing and the route handlers; api_server turns it into the response.

#include <optional>
#include <string>

#include "core/error.h"
#include "server/http_types.h"

namespace tokamak::server {

class ApiError : public Error {
 public:
  // type defaults from the status: 400 invalid_request_error, 401 authentication_error,
  // 404 not_found_error, 429 rate_limit_error, 5xx server_error, ...
  ApiError(int status, const std::string& message, std::string param = {}, std::string code = {},
           HttpHeaders headers = {});

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }
  const HttpHeaders& headers() const { return headers_; }

 private:
  int status_;
  std::string type_;
  std::string param_;
  std::string code_;
  HttpHeaders headers_;
};

// OpenAI's error type for an HTTP status.
const char* error_type_for_status(int status);

// {"error": {...}} as JSON text; param and code are null when empty.
std::string error_body(const std::string& message, const std::string& type,
                       const std::string& param, const std::string& code);
HttpResponse error_response(const ApiError& error);
// For the HTTP layer's own errors (404, 405, 413, ...).
HttpResponse error_response(int status, const std::string& message);

}  // namespace tokamak::server

#include "server/http_wire.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace tokamak::server {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; };
           return lower(x) == lower(y);
         });
}

namespace {

// Names the server writes itself from the framing it chose.
bool is_framing_header(std::string_view name) {
  return iequals(name, "content-length") || iequals(name, "transfer-encoding") ||
         iequals(name, "connection");
}

bool is_token_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool header_is_safe(std::string_view name, std::string_view value) {
  return !name.empty() && std::all_of(name.begin(), name.end(), is_token_char) &&
         value.find_first_of("\r\n") == std::string_view::npos;
}

void append_field(std::string& out, std::string_view name, std::string_view value) {
  out.append(name).append(": ").append(value).append("\r\n");
}

}  // namespace

bool status_has_no_body(int status) {
  return (status >= 100 && status < 200) || status == 204 || status == 304;
}

std::string_view reason_phrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 206:
      return "Partial Content";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 304:
      return "Not Modified";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 415:
      return "Unsupported Media Type";
    case 422:
      return "Unprocessable Entity";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 505:
      return "HTTP Version Not Supported";
  }
  if (status >= 200 && status < 300) return "Success";
  if (status >= 300 && status < 400) return "Redirection";
  if (status >= 400 && status < 500) return "Client Error";
  return "Server Error";
}

void append_head(std::string& out, const ResponseHead& head, const HttpHeaders& common,
                 const HttpHeaders& extra) {
  // A status outside 100..999 would not be three digits: that is a bug in the caller, and
  // the client is better served by a 500 than by a broken status line.
  const int status = head.status >= 100 && head.status <= 999 ? head.status : 500;
  out.append("HTTP/1.1 ").append(std::to_string(status)).append(" ");
  out.append(reason_phrase(status)).append("\r\n");
  for (const auto& [name, value] : common) append_field(out, name, value);
  if (!head.content_type.empty() && header_is_safe("content-type", head.content_type)) {
    append_field(out, "Content-Type", head.content_type);
  }
  switch (head.framing) {
    case BodyFraming::ContentLength:
      if (!status_has_no_body(status)) {
        append_field(out, "Content-Length", std::to_string(head.content_length));
      }
      break;
    case BodyFraming::Chunked:
      append_field(out, "Transfer-Encoding", "chunked");
      break;
    case BodyFraming::UntilClose:
      break;
  }
  switch (head.connection) {
    case ConnectionHeader::None:
      break;
    case ConnectionHeader::Close:
      append_field(out, "Connection", "close");
      break;
    case ConnectionHeader::KeepAlive:
      append_field(out, "Connection", "keep-alive");
      break;
  }
  for (const auto& [name, value] : extra) {
    if (!is_framing_header(name) && header_is_safe(name, value)) append_field(out, name, value);
  }
  out.append("\r\n");
}

void append_chunk(std::string& out, std::string_view data) {
  if (data.empty()) return;
  char size[24];
  const int n = std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  out.append(size, size_t(n)).append(data).append("\r\n");
}

HttpResponse default_error_response(int status, const std::string& message) {
  const nlohmann::json body = {{"error", {{"message", message}}}};
  HttpResponse response;
  response.status = status;
  // `replace`: a message cut inside a UTF-8 sequence still makes valid JSON.
  response.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return response;
}

}  // namespace tokamak::server

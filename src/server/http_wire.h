#pragma once
// The bytes of an HTTP/1.1 response as they go on the wire: the status line and headers,
// chunk framing, and the server's default error body. Plain strings, no Boost.

#include <cstddef>
#include <string>
#include <string_view>

#include "server/http_types.h"

namespace tokamak::server {

// Header names and tokens compare without regard to ASCII case (RFC 9110, 5.1).
bool iequals(std::string_view a, std::string_view b);

// How the end of a response body is found by the client.
enum class BodyFraming { ContentLength, Chunked, UntilClose };

// The Connection header of a response.
enum class ConnectionHeader { None, Close, KeepAlive };

struct ResponseHead {
  int status = 200;
  std::string_view content_type = {};  // empty: no Content-Type header
  BodyFraming framing = BodyFraming::ContentLength;
  size_t content_length = 0;  // with ContentLength
  ConnectionHeader connection = ConnectionHeader::None;
};

// Appends "HTTP/1.1 <status> <reason>\r\n", the headers and the blank line. `common` come
// first (Server, CORS), then `extra` (the handler's). Framing headers (Content-Length,
// Transfer-Encoding, Connection) are the server's own: such names in `extra` are dropped,
// and so is any header whose name or value could break the message (CR, LF, ':' in a name).
// 1xx, 204 and 304 responses get no Content-Length.
void append_head(std::string& out, const ResponseHead& head, const HttpHeaders& common,
                 const HttpHeaders& extra);

// Appends one chunk of a chunked body: "<hex size>\r\n<data>\r\n". Nothing for empty data
// (an empty chunk would end the body).
void append_chunk(std::string& out, std::string_view data);
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

// True for statuses whose responses have no body (1xx, 204, 304).
bool status_has_no_body(int status);

// "OK", "Not Found", ...; a generic phrase for a status we do not name.
std::string_view reason_phrase(int status);

// {"error":{"message":"..."}} as application/json: the formatter when the app gives none.
HttpResponse default_error_response(int status, const std::string& message);

}  // namespace tokamak::server

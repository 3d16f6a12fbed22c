#include "server/http_wire.h"

#include <gtest/gtest.h>

namespace tokamak::server {
namespace {

TEST(HttpWire, HeadHasStatusFramingAndHeadersInOrder) {
  std::string out;
  append_head(out,
              {.status = 429,
               .content_type = "application/json",
               .framing = BodyFraming::ContentLength,
               .content_length = 12,
               .connection = ConnectionHeader::Close},
              {{"Server", "tokamak"}}, {{"Retry-After", "1"}});
  EXPECT_EQ(out,
            "HTTP/1.1 429 Too Many Requests\r\n"
            "Server: tokamak\r\n"
            "Content-Type: application/json\r\n"
            "Content-Length: 12\r\n"
            "Connection: close\r\n"
            "Retry-After: 1\r\n"
            "\r\n");
}

TEST(HttpWire, HandlerHeadersCannotBreakTheFraming) {
  std::string out;
  append_head(out, {.status = 200, .framing = BodyFraming::Chunked}, {},
              {{"Content-Length", "5"},
               {"transfer-encoding", "gzip"},
               {"Connection", "upgrade"},
               {"X-Split", "a\r\nInjected: 1"},
               {"Bad Name", "v"},
               {"X-Fine", "ok"}});
  EXPECT_EQ(out, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Fine: ok\r\n\r\n");
}

TEST(HttpWire, NoContentLengthWhereNoBodyIsAllowed) {
  std::string out;
  append_head(out, {.status = 204, .content_length = 0}, {}, {});
  EXPECT_EQ(out, "HTTP/1.1 204 No Content\r\n\r\n");
  EXPECT_TRUE(status_has_no_body(304));
  EXPECT_FALSE(status_has_no_body(200));
}

TEST(HttpWire, OddStatusesStillMakeAValidStatusLine) {
  std::string out;
  append_head(out, {.status = 299, .content_length = 0}, {}, {});
  EXPECT_EQ(out.substr(0, out.find("\r\n")), "HTTP/1.1 299 Success");
  out.clear();
  append_head(out, {.status = 42, .content_length = 0}, {}, {});
  EXPECT_EQ(out.substr(0, out.find("\r\n")), "HTTP/1.1 500 Internal Server Error");
}

TEST(HttpWire, ChunksAreHexSizedAndEmptyDataIsNoChunk) {
  std::string out;
  append_chunk(out, std::string(26, 'a'));
  EXPECT_EQ(out, "1a\r\n" + std::string(26, 'a') + "\r\n");
  append_chunk(out, "");
  EXPECT_EQ(out.size(), 4u + 26 + 2);
}

TEST(HttpWire, DefaultErrorIsJson) {
  const HttpResponse r = default_error_response(404, "no \"route\"");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_EQ(r.body, R"({"error":{"message":"no \"route\""}})");
}

}  // namespace
}  // namespace tokamak::server

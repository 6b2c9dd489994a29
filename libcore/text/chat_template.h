// Chat templates: the Jinja template of a tokenizer_config.json rendered as Hugging Face's
// reference renderer (@huggingface/jinja, what transformers.js runs; transformers runs
// Python's jinja2 with the same trim_blocks and lstrip_blocks) renders it, byte for byte,
// for what chat templates use (docs/tokenizer.md lists it). Anything else in a template
// is one error line naming it.
#pragma once

#include <memory>
#include <string>

namespace tl {

class ChatTemplate {
 public:
  // Parses `source`; throws Error (bad input) at what it cannot read.
  explicit ChatTemplate(const std::string& source);
  ChatTemplate(ChatTemplate&&) noexcept;
  ~ChatTemplate();
  // Renders it with the variables of `context`, a JSON object (messages,
  // add_generation_prompt, bos_token, ...). A template that calls raise_exception, or
  // does what its values do not allow, throws Error (bad input).
  std::string render(const std::string& context) const;

  struct Node;

 private:
  std::unique_ptr<Node> root_;
};

// A tokenizer_config.json's chat template (a string, or a list of named ones: "default")
// and its special tokens as the variables a render gets (bos_token, eos_token, ...: their
// text), as a JSON object. Throws Error (bad input) where the file has no template.
struct ChatConfig {
  std::string source;
  std::string tokens;  // {"bos_token": "<s>", ...}
};
ChatConfig readChatConfig(const std::string& path);

// The render context of messages and add_generation_prompt (a JSON object) with the
// config's tokens added where the context lacks them.
std::string chatContext(const ChatConfig& config, const std::string& request);

// The text of the config's special token `name` (eos_token, ...), or "" where it has none.
std::string chatToken(const ChatConfig& config, const std::string& name);

// s as a JSON string literal (invalid UTF-8 replaced).
std::string jsonString(const std::string& s);

}  // namespace tl

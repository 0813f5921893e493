//! The model providers: OpenAI-compatible Chat Completions, Anthropic
//! Messages, and the scripted model.

pub mod anthropic;
mod http;
pub mod openai;
pub mod script;
mod wire;

pub use anthropic::Anthropic;
pub use http::{HttpSettings, check_base_url};
pub use openai::OpenAiCompat;
pub use script::ScriptModel;

//! The model providers: OpenAI-compatible Chat Completions, Anthropic
//! Messages, and the scripted model.

mod anthropic;
mod http;
mod openai;
mod script;
mod wire;

pub use anthropic::Anthropic;
pub use http::{BaseUrlError, HttpSettings, check_base_url};
pub use openai::OpenAiCompat;
pub use script::{ScriptError, ScriptModel};

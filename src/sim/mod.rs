//! The built-in OpenAI-compatible simulated inference server.

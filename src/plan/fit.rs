//! Whether a server command's model fits the GPU memory the command gives it, from the facts
//! tables (fixtures/models.toml, fixtures/gpus.toml). Checked before servers start: a server
//! that cannot hold its weights is otherwise waited for until `--server-timeout` (20 minutes
//! in the recipes) and then fails with an engine's log; and the docs' recipes are tested
//! with it (tests/it/recipes_fit.rs).
//!
//! Only what the command says plainly is read: the model after `serve` or `--model`
//! (`--model-path`), its precision (`--quantization`, a precision suffix of the model's name
//! such as `-FP8`, `--dtype`), the memory fraction (vLLM's `--gpu-memory-utilization`,
//! default 0.9; SGLang's `--mem-fraction-static`) and the GPUs the weights are split over
//! (`--tensor-parallel-size`, `--pipeline-parallel-size`). A model or precision the tables
//! do not know, or offloading to CPU memory, leaves the command unchecked: never a false
//! refusal.

use super::facts::{normalize, weight_bytes_for, Facts};

/// vLLM's default `--gpu-memory-utilization`.
const VLLM_DEFAULT_FRACTION: f64 = 0.9;

/// What a server command asks of its GPUs.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerShape {
    /// The facts table's name of the model.
    pub model: String,
    /// The precision as read (e.g. "BF16", "FP8").
    pub precision: String,
    /// Parameters, billions, and all weights at the precision, bytes.
    pub params_b: f64,
    pub weight_bytes: f64,
    /// The share of each GPU's memory the server may take, and where it was read.
    pub fraction: f64,
    pub fraction_source: String,
    /// GPUs the weights are split over (tensor x pipeline parallel).
    pub gpus: u32,
}

impl ServerShape {
    /// Weights each GPU holds, bytes.
    pub fn weight_bytes_per_gpu(&self) -> f64 {
        self.weight_bytes / self.gpus as f64
    }
}

/// The value after `flag` (`--flag V` or `--flag=V`), the first one written.
fn value<'a>(words: &[&'a str], flags: &[&str]) -> Option<&'a str> {
    words.iter().enumerate().find_map(|(i, w)| {
        flags.iter().find_map(|f| {
            if *w == *f {
                words.get(i + 1).copied()
            } else {
                w.strip_prefix(f).and_then(|r| r.strip_prefix('='))
            }
        })
    })
}

/// The model the command serves: the word after `serve` (vLLM, SGLang's `serve`) when it is
/// not a flag, else `--model` / `--model-path`.
fn model_word<'a>(words: &[&'a str]) -> Option<&'a str> {
    let after_serve = words
        .iter()
        .position(|w| *w == "serve")
        .and_then(|i| words.get(i + 1))
        .filter(|w| !w.starts_with('-'))
        .copied();
    after_serve.or_else(|| value(words, &["--model", "--model-path"]))
}

/// The facts' model a name means, and the precision its suffix names ("Qwen3.6-27B-FP8":
/// Qwen3.6-27B at FP8); None when neither the name nor a shorter one with a known precision
/// suffix is in the table.
fn model_and_suffix<'f>(
    facts: &'f Facts,
    name: &str,
) -> Option<(&'f super::facts::ModelFacts, Option<String>)> {
    let name = name.trim_matches(['"', '\'']);
    if let Some(m) = facts.model(name) {
        return Some((m, None));
    }
    let parts: Vec<&str> = name.split('-').collect();
    (1..parts.len()).rev().find_map(|cut| {
        let suffix = parts[cut..].join("-");
        weight_bytes_for(&suffix)?;
        facts
            .model(&parts[..cut].join("-"))
            .map(|m| (m, Some(suffix)))
    })
}

/// Reads a server command; None when it cannot be checked (see the module's notes).
pub fn read_command(command: &str, facts: &Facts) -> Option<ServerShape> {
    let words: Vec<&str> = command.split_whitespace().collect();
    if words.iter().any(|w| w.starts_with("--cpu-offload")) {
        return None;
    }
    let (model, suffix) = model_and_suffix(facts, model_word(&words)?)?;
    let precision = match (value(&words, &["--quantization", "-q"]), suffix) {
        (Some(q), _) => q.to_string(),
        (None, Some(s)) => s,
        (None, None) => match value(&words, &["--dtype"]) {
            Some(d) if normalize(d) != "auto" => d.to_string(),
            _ => format!("{}", Precision(model.bytes_per_param)),
        },
    };
    let bytes_per_param = weight_bytes_for(&precision)?;
    let (fraction, fraction_source) = match value(
        &words,
        &["--gpu-memory-utilization", "--mem-fraction-static"],
    ) {
        Some(f) => {
            let flag = match command.contains("--gpu-memory-utilization") {
                true => "--gpu-memory-utilization",
                false => "--mem-fraction-static",
            };
            (f.parse::<f64>().ok()?, format!("{flag} {f}"))
        }
        None if words.iter().any(|w| w.ends_with("vllm")) => (
            VLLM_DEFAULT_FRACTION,
            format!("vLLM's default --gpu-memory-utilization {VLLM_DEFAULT_FRACTION}"),
        ),
        None => (1.0, "all of it (no memory fraction given)".to_string()),
    };
    if !(fraction > 0.0 && fraction <= 1.0) {
        return None;
    }
    let parallel = |flags: &[&str]| -> Option<u32> {
        match value(&words, flags) {
            Some(n) => n.parse::<u32>().ok().filter(|n| (1..=1024).contains(n)),
            None => Some(1),
        }
    };
    let tp = parallel(&["--tensor-parallel-size", "--tp-size", "--tp", "-tp"])?;
    let pp = parallel(&["--pipeline-parallel-size", "--pp-size", "-pp"])?;
    Some(ServerShape {
        model: model.name.clone(),
        precision: precision.to_uppercase(),
        params_b: model.params_b,
        weight_bytes: model.params_b * 1e9 * bytes_per_param,
        fraction,
        fraction_source,
        gpus: tp * pp,
    })
}

/// "BF16" for 2 bytes a parameter, "FP8" for 1, else the bytes.
struct Precision(f64);

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            2.0 => write!(f, "BF16"),
            1.0 => write!(f, "FP8"),
            4.0 => write!(f, "FP32"),
            b => write!(f, "{b} bytes a parameter"),
        }
    }
}

/// Why servers of these commands cannot load their weights on GPUs of `gpu_name`, in words
/// (model, weights, GPU memory, the split); None when they fit or cannot be checked.
/// `shared`: the commands' servers run at the same time on the same GPUs (one slot for both
/// arms), so their memory fractions add up.
pub fn misfit(
    facts: &Facts,
    commands: &[(&str, &str)],
    gpu_name: &str,
    shared: bool,
) -> Option<String> {
    let gpu = facts.gpu(gpu_name)?;
    let gb = |bytes: f64| bytes / 1e9;
    let mut total = 0.0;
    let mut split = Vec::new();
    for (flag, command) in commands {
        let Some(s) = read_command(command, facts) else {
            continue;
        };
        let budget = s.fraction * gpu.memory_gb;
        if s.weight_bytes_per_gpu() > budget * 1e9 {
            return Some(format!(
                "{flag}: {} at {} is {:.0} GB of weights ({}B parameters in \
                 fixtures/models.toml), over {} GPU{}; {} gives it {:.1} GB of each {} \
                 ({:.0} GB; the GPU tool says {gpu_name:?}): the server cannot load them. Give \
                 it more memory (a larger fraction, one server per GPU, tensor parallelism over \
                 more GPUs) or smaller weights (an FP8 checkpoint: {:.0} GB)",
                s.model,
                s.precision,
                gb(s.weight_bytes),
                s.params_b,
                s.gpus,
                if s.gpus == 1 { "" } else { "s" },
                s.fraction_source,
                budget,
                gpu.name,
                gpu.memory_gb,
                s.params_b,
            ));
        }
        total += s.fraction;
        split.push(format!("{flag} {}", s.fraction_source));
    }
    (shared && split.len() > 1 && total > 1.0 + 1e-9).then(|| {
        format!(
            "the servers share each GPU of their slot ({} at once), and their memory fractions \
             add up to {total:.2} of a {} ({:.0} GB): the second cannot start. Give each under \
             half (e.g. --gpu-memory-utilization 0.45) or each its own GPU (--slots \"0;1\")",
            split.join(", "),
            gpu.name,
            gpu.memory_gb
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BF16_045: &str = "CUDA_VISIBLE_DEVICES={gpus} exec vllm serve Qwen/Qwen3.6-27B \
                            --port {port} --max-model-len 8192 --gpu-memory-utilization 0.45";

    #[test]
    fn reads_model_precision_fraction_and_parallelism() {
        let f = Facts::builtin();
        let s = read_command(BF16_045, &f).unwrap();
        assert_eq!(
            (s.model.as_str(), s.precision.as_str()),
            ("Qwen3.6-27B", "BF16")
        );
        assert_eq!((s.weight_bytes, s.fraction, s.gpus), (54e9, 0.45, 1));
        let fp8 = "vllm serve Qwen/Qwen3.6-27B-FP8 --port {port} --tensor-parallel-size=2";
        let s = read_command(fp8, &f).unwrap();
        assert_eq!((s.precision.as_str(), s.weight_bytes), ("FP8", 27e9));
        assert_eq!((s.fraction, s.gpus), (VLLM_DEFAULT_FRACTION, 2));
        let q = "python -m sglang.launch_server --model-path Qwen/Qwen3.6-27B --quantization fp8 \
                 --mem-fraction-static 0.4";
        let s = read_command(q, &f).unwrap();
        assert_eq!((s.weight_bytes, s.fraction), (27e9, 0.4));
        // Unknown models, precisions and CPU offload are not checked.
        for c in [
            "vllm serve my-org/private-7b --port {port}",
            "vllm serve Qwen/Qwen3.6-27B-Mystery --port {port}",
            "vllm serve Qwen/Qwen3.6-27B --cpu-offload-gb 40 --gpu-memory-utilization 0.3",
            "throughline serve-sim --preset qwen27b --port {port}",
        ] {
            assert_eq!(read_command(c, &f), None, "{c}");
        }
    }

    #[test]
    fn says_what_does_not_fit_and_passes_what_does() {
        let f = Facts::builtin();
        let gpu = "NVIDIA RTX PRO 6000 Blackwell Server Edition";
        let why = misfit(&f, &[("--server-command", BF16_045)], gpu, true).unwrap();
        for part in ["Qwen3.6-27B", "BF16", "54 GB", "0.45", "43.2 GB", "96 GB"] {
            assert!(why.contains(part), "{part}: {why}");
        }
        let fp8 = BF16_045.replace("Qwen3.6-27B", "Qwen3.6-27B-FP8");
        let both = [
            ("--server-command", fp8.as_str()),
            ("--base-server-command", &fp8),
        ];
        assert_eq!(misfit(&f, &both, gpu, true), None);
        let full = BF16_045.replace("0.45", "0.90");
        let two = [
            ("--server-command", full.as_str()),
            ("--base-server-command", &full),
        ];
        assert_eq!(misfit(&f, &two, gpu, false), None);
        let shared = misfit(&f, &two, gpu, true).unwrap();
        assert!(shared.contains("1.80"), "{shared}");
        // A GPU the tables do not know, and the older 48 GB RTX 6000 Ada, are not checked
        // against the 96 GB card.
        assert_eq!(
            misfit(&f, &two, "NVIDIA RTX 6000 Ada Generation", false),
            None
        );
        assert_eq!(misfit(&f, &two, "Mystery GPU", false), None);
        // Two GPUs of tensor parallelism hold half each.
        let tp = "vllm serve Qwen/Qwen3.5-122B-A10B --tensor-parallel-size 4 --port {port}";
        assert_eq!(misfit(&f, &[("--server-command", tp)], gpu, false), None);
        let tp1 = tp.replace("4", "1");
        assert!(misfit(&f, &[("--server-command", &tp1)], gpu, false).is_some());
    }
}

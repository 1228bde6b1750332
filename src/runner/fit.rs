//! Servers that cannot hold their model refused before the first start (issue 50): a
//! server command's model, precision and memory split read against the GPU the machine has
//! (`plan::fit`), where both are known.

use anyhow::Result;

use super::setup::BlocksSetup;

/// Refuses, before any server starts, servers whose model cannot fit the memory their command
/// gives them on this machine's GPUs (model and GPU known: see plan/fit.rs).
pub fn refuse_unfit(setup: &BlocksSetup) -> Result<()> {
    let commands: Vec<(&str, &str)> = [
        ("--server-command", Some(setup.head_command.as_str())),
        ("--base-server-command", setup.base_command.as_deref()),
    ]
    .into_iter()
    .filter_map(|(flag, c)| c.map(|c| (flag, c)))
    .collect();
    let facts = crate::plan::Facts::builtin();
    if commands
        .iter()
        .all(|(_, c)| crate::plan::fit::read_command(c, &facts).is_none())
    {
        return Ok(());
    }
    // One GPU model on the machine: with several (joined by " + ") which one a slot gets is
    // not known here.
    let Some(gpu) = crate::load::gpu::detect()
        .and_then(|g| g.model)
        .filter(|m| !m.contains(" + "))
    else {
        return Ok(());
    };
    let shared = setup.relative() && setup.pairs.iter().any(|p| p.len() == 1);
    match crate::plan::fit::misfit(&facts, &commands, &gpu, shared) {
        Some(why) => anyhow::bail!("the servers would not fit their GPUs: {why}"),
        None => Ok(()),
    }
}

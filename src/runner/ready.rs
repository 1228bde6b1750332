//! Before measuring servers that are already up (not started by throughline): wait until
//! each answers, and learn what the run will detect of the environment, detected the same
//! way, so that a check can refuse another environment without spending the run.

use std::time::Duration;

use anyhow::Result;

use crate::load::probe;
use crate::profile::Profile;
use crate::record::Environment;

/// Waits up to `wait` for the profile's servers and `base_endpoints` to answer, then returns
/// `given` with what the servers report filled in (model, engine, its version, the GPUs);
/// None when the model cannot be told (the run itself then explains why).
pub async fn servers_ready(
    profile: &Profile,
    base_endpoints: &[String],
    wait: Duration,
    given: &Environment,
) -> Result<Option<Environment>> {
    let all: Vec<String> = (profile.target.endpoints.iter())
        .chain(base_endpoints)
        .cloned()
        .collect();
    // The same key header the load sends: a server that guards /v1 (vLLM's --api-key)
    // answers 401 to a check without it.
    let api_key = crate::load::stream::client::api_key_header(profile)?;
    probe::wait_healthy(&all, wait, api_key.as_ref()).await?;
    let client = crate::load::stream::client::build_probe_client(api_key.as_ref())?;
    let endpoints = &profile.target.endpoints;
    let report = probe::probe(&client, endpoints, profile.target.api_key_env.as_deref()).await?;
    let mut env = given.clone();
    env.endpoints = endpoints.len();
    let Ok(model) = report.model(&profile.target.model, &endpoints[0]) else {
        return Ok(None);
    };
    env.model = Some(model);
    probe::fill_environment(&mut env, &report, endpoints);
    Ok(Some(env))
}

pub async fn run(_args: crate::cli::DemoArgs) -> anyhow::Result<crate::exit::Exit> {
    anyhow::bail!("demo: not yet")
}

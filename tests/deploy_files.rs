//! The deployment files of deploy/, checked with what this machine runs (scripts/check-deploy.sh: systemd's
//! verifier on the unit, `haproxy -c` on the load balancer's configuration, the compose file and the Helm chart's
//! static parts parsed and their probes, replicas, disruption budget and secrets asserted), and the release archive
//! scripts/release.sh makes: what it holds, and that its binary runs. Missing tools fail, naming scripts/test-deps.sh.

mod support;

use std::process::Command;
use std::time::Duration;

#[test]
fn the_unit_the_load_balancer_the_compose_file_and_the_helm_chart_check() {
    let out = support::run(
        Command::new(support::root().join("scripts/check-deploy.sh")).arg(env!("CARGO_BIN_EXE_remit")),
        Duration::from_secs(120),
    );
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "scripts/check-deploy.sh failed (scripts/test-deps.sh installs its tools):\n{stdout}{stderr}"
    );
    for checked in ["deploy/remit.service", "deploy/haproxy.cfg", "deploy/compose.yaml", "deploy/helm/remit"] {
        assert!(stdout.contains(checked), "{checked} was checked: {stdout}");
    }
}

#[test]
fn the_release_archive_holds_the_binary_the_unit_and_the_example_configuration() {
    let dir = support::temp_dir("release");
    let (out_dir, context) = (dir.join("dist"), dir.join("image"));
    let out = support::run(
        Command::new(support::root().join("scripts/release.sh"))
            .args(["--binary", env!("CARGO_BIN_EXE_remit"), "--out"])
            .arg(&out_dir)
            .arg("--image-context")
            .arg(&context),
        Duration::from_secs(120),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let archive = stdout.lines().next().unwrap();
    assert!(archive.ends_with("-linux.tar.gz"), "{archive}");
    let listing = Command::new("tar").args(["-tzf", archive]).output().unwrap();
    let listing = String::from_utf8_lossy(&listing.stdout);
    let version = env!("CARGO_PKG_VERSION");
    for file in [
        "bin/remit",
        "remit.service",
        "remit.toml",
        "README.md",
        "haproxy.cfg",
        "compose.yaml",
        "Containerfile",
        "compose/policy/shop.remit",
        "helm/remit/Chart.yaml",
        "helm/remit/templates/pdb.yaml",
    ] {
        assert!(listing.lines().any(|l| l == format!("remit-{version}/{file}")), "{file} in {listing}");
    }
    let sums = Command::new("sha256sum").arg("-c").arg(format!("{archive}.sha256")).current_dir(&out_dir).output();
    assert!(sums.unwrap().status.success(), "the checksum file matches");
    // The archive's binary runs from where it was unpacked.
    let unpacked = dir.join("unpacked");
    std::fs::create_dir_all(&unpacked).unwrap();
    assert!(Command::new("tar").args(["-xzf", archive, "-C"]).arg(&unpacked).status().unwrap().success());
    let help = Command::new(unpacked.join(format!("remit-{version}/bin/remit"))).args(["serve", "--help"]).output();
    let help = String::from_utf8_lossy(&help.unwrap().stdout).into_owned();
    assert!(help.contains("--config <FILE>") && help.contains("--drain-delay"), "{help}");
    // The image's build context: the binary, the loader and libraries it links, the Containerfile.
    let rootfs = context.join("rootfs");
    assert!(rootfs.join("usr/local/bin/remit").is_file());
    assert!(context.join("Containerfile").is_file());
    let ldd = Command::new("ldd").arg(env!("CARGO_BIN_EXE_remit")).output().unwrap();
    for line in String::from_utf8_lossy(&ldd.stdout).lines() {
        if let Some(path) = line.split_whitespace().find(|w| w.starts_with('/')) {
            assert!(rootfs.join(path.trim_start_matches('/')).is_file(), "{path} in the image's rootfs");
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// The image of deploy/Containerfile, built here with Debian's podman from the release's image context (`FROM
/// scratch`: no base image is pulled) and run: it answers `/health`, `/ready` and a decision as user 65532, and
/// `podman stop` (SIGTERM) drains it to exit 0 (scripts/container.sh says why it runs with runc here).
#[test]
fn the_image_builds_from_scratch_runs_as_non_root_and_stops_cleanly() {
    let out = support::run(
        Command::new(support::root().join("scripts/container.sh")).arg(env!("CARGO_BIN_EXE_remit")),
        Duration::from_secs(300),
    );
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "scripts/container.sh failed (scripts/test-deps.sh installs podman):\n{stdout}{stderr}"
    );
    for said in ["FROM scratch", "a decision in the container: allow", "runs as user 65532", "exit code 0"] {
        assert!(stdout.contains(said), "{said}: {stdout}");
    }
}

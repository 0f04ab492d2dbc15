//! `metadata.generateName`: the API server appends five random lowercase alphanumerics
//! to a prefix. The simulated cluster names pods this way and the controller names
//! NodeClaims this way, so both share one generator.

/// `<prefix>-<5 lowercase alphanumerics>` that `taken` does not already hold.
pub fn generate_name(
    rng: &mut fastrand::Rng,
    prefix: &str,
    mut taken: impl FnMut(&str) -> bool,
) -> String {
    loop {
        let suffix: String = (0..5)
            .map(|_| {
                let c = rng.u8(0..36);
                char::from(if c < 10 { b'0' + c } else { b'a' + c - 10 })
            })
            .collect();
        let name = format!("{prefix}-{suffix}");
        if !taken(&name) {
            return name;
        }
    }
}

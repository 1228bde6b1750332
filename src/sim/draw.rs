//! Seeded random draws shared by the engine, the faults and the session: seed derivation
//! and normal deviates. A leaf: it uses no other part of the simulator.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// splitmix64: derives independent seeds (per replica, per request) from one seed.
pub fn mix_seed(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D1_049B_B133_111E);
    z ^ (z >> 31)
}

/// Salt of the session-factor stream, so that it is independent of every replica's and
/// request's stream derived from the same seed.
const SESSION_SALT: u64 = 0x5E55_10F4_C70A_0001;

/// The speed factor of one session (one process start): `exp(jitter * z)` with
/// `z ~ N(0, 1)` drawn from `seed`; exactly 1 when `jitter` is 0.
pub fn session_factor(seed: u64, jitter: f64) -> f64 {
    if jitter == 0.0 {
        return 1.0;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(mix_seed(seed ^ SESSION_SALT));
    (jitter * standard_normal(&mut rng)).exp()
}

/// One N(0, 1) draw (Box-Muller; |z| < 8.6 since u1 >= 2^-53).
pub fn standard_normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = 1.0 - rng.gen::<f64>(); // (0, 1]
    let u2: f64 = rng.gen();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

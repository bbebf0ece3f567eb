// Package audit estimates a randomiser's privacy loss from samples and tests
// it against the ε the randomiser claims. It is pure math: no SQL and no I/O
// (randomness comes from a mechanisms.Source).
//
// # What is tested
//
// A randomiser M is ε-LDP if for every pair of inputs x, x' and every event
// E, Pr[M(x) ∈ E] ≤ e^ε·Pr[M(x') ∈ E]. An audit picks x, x' and E and
// bounds ln(Pr[M(x) ∈ E]/Pr[M(x') ∈ E]) from below with samples; if the
// bound exceeds the randomiser's EffectiveEpsilon (the loss its sampler
// claims to realise, ≤ the requested ε), the claim is refuted. A pass is
// evidence, not proof: it says that this audit's events did not see a loss
// above the claim.
//
// # Estimator
//
// The inputs are neighbours that maximise the loss ([KRR], [Laplace],
// [Vector], [Encoded] choose them: labels 0 and 1 for k-RR; 0 and Δ·e₁ for
// a Laplace of sensitivity Δ; opposite vertices ±l·e₁ of an ℓ1 ball;
// opposite corners of a box, and for Duchi also two corners one coordinate
// apart; for PrivUnit an input of the largest norm and a tiny one pointing
// the other way). The outputs are divided into cells by a [Partition]: exact
// outcomes for discrete mechanisms (k-RR, Duchi), the clipped projection
// onto x − x' for Laplace (for which it is the exact privacy-loss
// statistic), the norm level and the cosine with x − x' for PrivUnit.
//
// Run draws Samples releases at each input and splits them in halves:
//
//  1. Selection half. For every pair, partition and direction, the cells
//     are sorted by their estimated likelihood ratio, and the candidate
//     events are the unions of the top cells (the Neyman–Pearson order, the
//     threshold sets of DP-Sniper); the one chosen maximises the lower
//     bound below computed on this half. Any event is a valid choice, so
//     the selection may look at the data as much as it likes.
//
//  2. Held-out half, drawn afresh at the chosen pair only. With k₁, k₂ the
//     event's counts in n releases at the favoured input and the other,
//
//     ε̂_lower = ln( CP_lower(k₁, n; α/2) / CP_upper(k₂, n; α/2) ),
//
//     where CP are one-sided Clopper–Pearson bounds (exact binomial
//     bounds: Pr[CP_lower > p] ≤ α/2 for every p). By the union bound,
//     with probability at least 1 − α both hold at once, and then
//     ε̂_lower ≤ ln(Pr[E|x]/Pr[E|x']) ≤ the true loss. Only one event is
//     evaluated on this half, so no further (Bonferroni) correction is
//     needed.
//
// The point estimate is ln(k₁/k₂) on the held-out half. The audit PASSES if
// ε̂_lower ≤ EffectiveEpsilon. The default confidence is 1 − α = 1 − 10⁻⁶:
// a randomiser that keeps its claim fails with probability at most 10⁻⁶.
//
// # Power
//
// With the default 10⁶ samples per input at ε = 1 the point estimate of a
// correct randomiser is within about 0.01 (k-RR, scalar and ℓ1-ball
// Laplace, Duchi on a box) to 0.03 (PrivUnit, box Laplace at d = 4) of its
// effective ε, and the lower bound 0.02–0.07 below it; a Laplace with half
// the noise scale (true loss 2ε) or a k-RR or Duchi with the keep
// probability of 1.5ε is refuted with the same budget (see the tests).
// Events of small probability cost power: a box Laplace of dimension d
// needs every coordinate in its tail (probability 2⁻ᵈ), so keep d ≤ 8.
//
// # The host path
//
// [Encoded] audits what LDP_ENCODE releases through an untrusted encoder:
// encode, refuse a non-finite encoding, clip into the declared set,
// randomise ([HostRelease]). A hostile encoder that returns huge vectors
// cannot raise the loss, because of the clip. A refusal (the host fails the
// statement) is an outcome the caller sees, so the audit counts it as one
// ([ErrRefused]): an encoder that returns NaN for some inputs only makes
// the error itself reveal the input, and the audit fails it. [Released]
// does the same for a path seen only through its releases, estimating the
// encodings from pilot releases: "ldpsql audit encode:NAME" runs it on
// LDP_ENCODE_JSON itself.
package audit

// Package classifier trains the downstream classifiers of LDP data
// collection (Mansbridge, "Representation Learning and Applications in
// Local Differential Privacy", Sec 4.2.3; "Learning to Noise", §3.2): its
// one job is to fit, serialise and evaluate a small MLP from privatised rows
// under an objective that accounts for the privatisation noise. It knows
// nothing of SQL, storage or privacy budgets: callers pass float32 rows, the
// Laplace scale and the label channel.
//
// # Data and notation
//
// A data owner holds a clean latent z ∈ R^d (the VLM's clipped encoder mean)
// and a label y ∈ {0…K−1}, and releases z̃ = z + s with s_i ~ Laplace(0, b)
// i.i.d. (b = 2l/ε_x) and ỹ drawn from the K×K channel
//
//	R[i][j] = p(ỹ = i | y = j)        (columns sum to 1)
//
// e.g. K-ary randomised response, [KRRMatrix]. The collector also holds M
// clean, unlabelled auxiliary latents ẑ_1…ẑ_M (the mechanism's own data D1).
//
// # Objectives
//
// Prior-marginalised (thesis Eq 4.11; [TrainMarginal]): the classifier
// p_ψ(y|z) only ever sees the clean ẑ_m; the privatised pairs (z̃_n, ỹ_n) are
// explained by the empirical prior p(z) = (1/M) Σ_m δ(z − ẑ_m). Training
// maximises Σ_n log p(ỹ_n, z̃_n) with
//
//	p(ỹ, z̃) = (1/M) Σ_m Σ_y R[ỹ][y] · p_ψ(y|ẑ_m) · Π_i (1/2b)·exp(−|z̃_i − ẑ_m,i|/b)
//
// which in log space is
//
//	log p(ỹ_n, z̃_n) = −log M + LSE_m [ w_nm + A[ỹ_n][m] ]
//	w_nm    = −d·log(2b) − ‖z̃_n − ẑ_m‖₁ / b                   (independent of ψ)
//	A[k][m] = log Q[k][m],  Q[k][m] = Σ_y R[k][y]·softmax_ψ(ẑ_m)_y
//
// With responsibilities r_nm = softmax_m(w_nm + A[ỹ_n][m]) and
// G[k][m] = Σ_{n: ỹ_n = k} r_nm, the gradient of the loss
// −(1/B)·Σ_{n∈batch} log p(ỹ_n, z̃_n) with respect to the logits of ẑ_m is
//
//	∂/∂logit_j(m) = (p_j/B) · (Σ_k G[k][m] − Σ_k R[k][j]·G[k][m]/Q[k][m]),  p = softmax_ψ(ẑ_m)
//
// so A and G are only K×M. One Adam step is therefore: (1) the MLP forward
// on all M auxiliary points, giving Q (K×M); (2) for each privatised point
// of the minibatch, a pass over all M accumulating its responsibilities into
// G[ỹ_n]; (3) the logits' gradient from G and back-propagation through the
// MLP on the M auxiliary points. The sum over m is always exact: there is no
// top-k truncation and no subsampling of the prior.
//
// Forward-corrected (thesis Eq 4.12, "marginalise label noise only";
// [TrainForward]): the classifier is applied to the privatised inputs x̃_n
// themselves (8-dim latents, 784-dim noisy pixels, …) and training maximises
//
//	Σ_n log Σ_y R[ỹ_n][y] · softmax_ξ(x̃_n)_y
//
// with logits gradient (p_j − R[ỹ][j]·p_j/Q)/B, Q = Σ_y R[ỹ][y]·p_y. When Q
// underflows (a channel with zeros) it is evaluated as a log-sum-exp.
// [NaiveTrain] is this objective with R = identity: plain cross-entropy of
// the noisy labels, the baseline that ignores the privatisation.
//
// # The marginal kernel
//
// Step (2) touches N×M pairs per epoch (13,500 × 45,000 at the thesis's
// MNIST scale) and is organised so that it needs no exp() at all in the
// common case. Write w_nm = −d·log(2b) − c_n/b + w'_nm with
// c_n = min_m ‖z̃_n − ẑ_m‖₁, so that w'_nm = −(‖z̃_n − ẑ_m‖₁ − c_n)/b ≤ 0 with
// maximum exactly 0: the ψ-independent part is shifted per row by its own
// maximum (the log-space trick, done once). Then
//
//	log p(ỹ_n, z̃_n) = −log M − d·log(2b) − c_n/b + log S_n,
//	S_n = Σ_m E_nm · Q[ỹ_n][m],   E_nm = exp(w'_nm) ∈ [0, 1]
//
// and the responsibilities are r_nm = E_nm·Q[ỹ_n][m]/S_n. Two kernels:
//
//   - Probability space, used when every entry of R is positive and
//     ρ = max_k max_y R[k][y]/min_y R[k][y] ≤ 2³² (K-RR with ε_y ≤ 22) and no
//     entry is below 2^-60: E is
//     computed once (N×M float32) and a row costs one float32·float32→float64
//     dot product S_n = E_n·Q[ỹ_n] and one axpy H[ỹ_n] += E_n/S_n; then
//     G = Q ⊙ H and G/Q = H in the gradient above. No exponential is
//     evaluated per step. E is stored as 0 where w' < ln 2^-90. This is exact
//     to float32 rounding: S_n ≥ E_{n,m*}·Q[ỹ_n][m*] = Q[ỹ_n][m*] ≥ min_y
//     R[ỹ_n][y] (m* the nearest auxiliary point, E = 1 there), while the
//     dropped terms total less than M·2^-90·max_y R[ỹ_n][y], so they change
//     S_n by less than M·ρ·2^-90 ≤ 2^-27 relative for M < 2³¹ (float32
//     rounding is 2^-24), and each dropped responsibility is below 2^-58.
//     Q never underflows: Q ≥ min_y R[k][y], which must be ≥ 2^-60.
//   - Log space, for channels with zeros or a larger ratio (e.g. R =
//     identity, ε_y = ∞), where Q may underflow: per row, s_m = w'_nm +
//     A[ỹ_n][m], e_m = exp(s_m − s*) with the fast exp below, S_n = Σ e_m,
//     log p = … + s* + log S_n, G[ỹ_n] += e/S_n. The shift s* is
//     A[ỹ_n][m*] (the value of s at the nearest auxiliary point m*, where
//     w' = 0), a lower bound of max_m s_m known without a pass over m, so
//     one pass suffices; it is used when max_m A[ỹ_n][m] − s* ≤ 80 (no e_m
//     can overflow float32), otherwise s* = max_m s_m costs a first pass.
//     Either way the term at the maximum or at m* is exactly 1, so S_n ≥ 1.
//     Terms with s_m − s* < ln 2^-126 are skipped (set to 0): each is below
//     the smallest normal float32 relative to that term, so together they
//     change S_n ≥ 1 by less than M·2^-126, far below float32 rounding,
//     which is the sense in which skipping is exact. A and the gradient's
//     G/Q are computed in float64 per auxiliary point (log-sum-exp when Q
//     underflows even in float64).
//
// The fast exponential (fexp: Cephes' expf scheme in float32 registers,
// relative error ≤ 1e-6 by test, 8e-8 observed) is used for the E table, the
// log-space kernel and the softmax of the probability-space head.
//
// The N×M table (E or w', float32) is precomputed when 4·N·M bytes fit
// Config.MemoryBudget (default 4 GiB; the training split first, then the
// validation split with what is left): 2.4 GB at N = 13,500, M = 45,000.
// A split whose table does not fit (or any split, with a negative budget)
// is streamed: each step computes every batch row's S_n in one pass over
// the M auxiliary points, distance, exponential and float64 sum fused with
// nothing stored, then, per block of 1024 auxiliary points (in parallel over
// blocks), recomputes the row's E (or e) on the block and adds f_n·E to the
// accumulator. Memory is then the feature-major copy of the auxiliary
// latents (d·M floats), the K×M accumulator and the rows themselves,
// nothing of size N×M (TestStreamedMemoryBounded). The kernels
// (stream.go) vectorise across auxiliary points, eight per AVX2 register
// (assembly behind a runtime CPU check; the pure-Go reference elsewhere and
// with -tags purego), never across features, so each pair's distance and
// exponential are the table's float32 operations in the table's order, and
// sums over m go into eight float64 lanes (lane m mod 8) reduced in one
// fixed order on both paths: table and stream give bit-identical training
// (TestTableAndRecomputeAgree). Streaming computes each E twice per step
// where the table reads it twice from memory; measured (below) the table
// is still faster where it fits, so it stays the default within the budget.
//
// BenchmarkMarginalEpoch at N = 13,500, M = 45,000, d = 8, K = 10 (one
// epoch, 106 steps), mean ± sd of 3 interleaved runs of -benchtime 3x on 2
// cores shared with other jobs at load average 8–15, so CPU seconds are
// the comparable figure (wall time mostly measures the waiting):
//
//	                        CPU s/epoch   wall s/epoch
//	table                   2.14 ± 0.20   4.5 ± 1.6
//	streamed                2.91 ± 0.27   7.3 ± 3.2
//	table, -tags openblas   2.08 ± 0.12   5.0 ± 1.6
//	streamed, openblas      2.87 ± 0.03   9.5 ± 4.9
//	before: table           3.00 ± 0.20   7.9 ± 4.4
//	before: recompute       7.37 ± 0.31  14.7 ± 3.8
//
// In log space (R = identity, 2 interleaved runs) the table takes 5.20 and
// 5.29 CPU s per epoch (7.38 before its row loop was vectorised,
// logTableRow), streaming 5.76 and 5.40: the float64 head and gradient of
// that kernel are most of the epoch there.
//
// The kernels cost 1.2–1.4 CPU ns per pair and pass (BenchmarkStreamKernel,
// two passes per pair and step), the table's sum 0.13–0.19 in cache; the
// MLP's passes over the M auxiliary points, shared by both paths, are most
// of the rest. The streamed epoch's CPU time is below the 3.25 s wall time
// of the PyTorch reference of the same protocol (issue #17) even if it ran
// on one core. Building the table costs 4.0 CPU s once (the streamed setup
// 0.33, BenchmarkMarginalSetup), so over the epochs of a training run the
// table still wins where it fits.
//
// For a symmetric channel (K-RR) the products with R cost K instead of K²
// per auxiliary point: Q[k] = flip + (keep − flip)·softmax_k.
//
// Parallelism: every phase of a step hands out work dynamically to
// runtime.GOMAXPROCS goroutines (so a goroutine the operating system
// deschedules holds up no barrier): the MLP passes over blocks of 1024
// auxiliary points; the kernel first over the minibatch's rows (S_n and the
// row's vector; groups of 8 rows when streamed), then over blocks of
// auxiliary points (each block adds the rows' contributions to its own
// columns of the K×M accumulator, in batch order); the backward pass over fixed groups of blocks, whose gradients
// are summed in order. Every floating-point sum thus has a fixed order, and
// training is reproducible bit for bit for a given seed, data and build,
// whatever GOMAXPROCS (both objectives). Batches are processed in chunks
// of at most 256 MiB/(4·M) rows (the log-space table path keeps a vector of
// M per row), with identical results.
//
// # The MLP
//
// ReLU hidden layers (Config.Hidden, default {50}: thesis §9.3; empty is
// multinomial logistic regression), a linear output layer of K logits and a
// softmax. Storage is float32; activations are feature-major (units ×
// samples). The layer products W·A and Wᵀ·dZ are nn/sgemm's AVX2 kernel
// (each element the chain of roundings of the axpys along the sample axis
// it replaced: results did not change), the weight gradients dots along
// the sample axis by gonum's BLAS.
// Initialisation: He-uniform U(±√(6/fan_in)) before a ReLU, Glorot-uniform
// for the output layer, biases 0, from a PCG stream of Config.Seed
// (math/rand/v2); another stream shuffles the rows every epoch.
//
// Inputs are standardised per feature, (x − mean)/std with the population
// standard deviation (std 1 for a constant feature), fitted on the
// classifier's training inputs: the auxiliary latents for the marginal
// objective (the model classifies clean latents), the privatised x̃ for the
// forward objective. The standardisation is part of the model.
//
// # Training
//
// Adam (β₁ 0.9, β₂ 0.999, ε 1e-8, bias-corrected; moments in float64) on
// minibatches of Config.BatchSize privatised rows (the last batch of an
// epoch may be shorter), at most Config.Epochs epochs. After every epoch
// the validation objective, the mean noisy negative log-likelihood of the
// validation split under the same objective, is computed: it uses only
// privatised data, so it is a legitimate private validation criterion.
// Training stops after Config.Patience epochs without a strict improvement
// of it, but before AutoMinEpochs (100, the thesis's length) only once the
// split tells the kept model from predicting the class frequencies (better
// by the test behind TrainStats.Warning, or significantly worse): a split
// too noisy for that cannot tell epochs apart either, and its lowest
// objective falls on an epoch by chance. The weights kept are those of the
// latest epoch whose validation objective is not significantly above the
// lowest (a paired test over the validation rows, nn.SelectZ standard
// errors): a validation split of a
// few dozen noisy rows cannot tell a barely trained model from a trained one,
// and the plain lowest then sometimes kept the first epoch's, which predicts
// the majority class. Without a validation split every epoch is run and the
// last weights are kept. Config.Restarts independent starts are trained and
// the one with the lowest validation objective (over its epochs) is kept.
// Left at zero, Epochs, Patience and Restarts follow the number of training
// rows ([Config.Resolve]): at least 3,000 Adam steps and
// a patience of 300 steps, so that a table of a few hundred rows (four steps
// an epoch) is not abandoned after twenty steps, and three starts of the
// marginal objective below 5,000 rows; on large tables this is the thesis's
// 100 epochs, patience 5 and one start. A NaN or infinite
// training loss is an error ([ErrDiverged]). Cancelling the context stops
// training between two steps and returns ctx.Err().
//
// # Models
//
// A [Model] predicts the most probable class (argmax of the logits) and the
// class probabilities of a row, and serialises to a versioned,
// SHA-256-checksummed binary format (see [Model.MarshalBinary]);
// [UnmarshalModel] rejects truncated, corrupted or inconsistent input with an
// error wrapping [ErrBadModel] and never panics.
package classifier

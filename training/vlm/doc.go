// Package vlm trains and runs the Variational Laplace Mechanism's encoder and
// decoder (Mansbridge, "Representation Learning and Applications in Local
// Differential Privacy", Sec 4.2.1; "Learning to Noise", §3): its one job is
// to fit, serialise and evaluate that model. It knows nothing of SQL, of
// privacy budgets or of randomisers: the noise that makes an encoding
// ε-LDP, Laplace(0, 2L/ε) on [Model.Encode]'s output, is added elsewhere.
//
// # Model
//
// Encoder: an MLP with ReLU hidden layers (default {400, 150, 50}) and a
// linear output layer of size D, followed by the ℓ1-rescaling activation
//
//	ν(h) = h · min(1, L/‖h‖₁) = h / max(1, ‖h‖₁/L)
//
// as its very last operation, so the encoder mean μ(x) = ν(h(x)) lies in the
// ℓ1 ball of radius L for every x (ℓ1 sensitivity 2L). The second form is
// the one differentiated in training: it is smooth at h = 0, where the first
// divides by zero.
//
// Posterior q(z|x) = Π Laplace(μ(x)_i, b) with one scalar scale b shared by
// all dimensions and rows; prior p(z) = Π Laplace(0, b₀ = 1/√2) (unit
// variance). Training maximises the ELBO, loss = −ELBO averaged over rows:
//
//	loss(x) = −E_q[log p(x|z)] + Σ_i KL(Laplace(μ_i, b) ‖ Laplace(0, b₀))
//	KL      = log(b₀/b) + |μ_i|/b₀ + (b/b₀)·exp(−|μ_i|/b) − 1
//
// with one reparameterised sample per row, z = μ + b·ξ, ξ_i =
// −sign(u_i)·log(1 − 2|u_i|), u_i ~ U(−½, ½) (u is drawn from a seeded PCG and
// kept inside (−½, ½) so the log is finite).
//
// The training scale b: with Config.EpsPretrain > 0 it is fixed at
// b_train = 2L/EpsPretrain (the thesis's ε_pre-training); with EpsPretrain = 0
// it is a learnt scalar, parameterised as b = exp(ρ) with ρ initialised to
// log(1/(2√2)) = half the prior scale (the thesis's "learnt" rows, ε = ∞).
// Either way b is only a training regulariser: it is stored in the model for
// inspection ([Model.TrainScale]) and must never be used as the privatisation
// scale, which is always 2L/ε_x.
//
// Decoder: an MLP mirroring the encoder (default hidden {50, 150, 400}) from D
// to the input dimension, with a linear output layer and the likelihood
//
//   - "bernoulli" (default): features in [0, 1] (pixels/255 are treated as
//     continuous Bernoulli targets: the binary cross-entropy
//     Σ softplus(a) − x·a of the logits a); the decoder mean is sigmoid(a);
//   - "gaussian": for standardised tabular features, N(x; a, 1) with the
//     variance fixed at 1 (the standardised variance, not learnt), so the
//     negative log-likelihood is Σ ½(x − a)² + ½·log 2π; the decoder mean is a.
//
// The linear variant (Config.Linear) has no hidden layers in either network
// (encoder x ↦ ν(Wx + c), decoder z ↦ W'z + c'), and is trained with the same
// noise, KL and clipping.
//
// # Training
//
// Automatic differentiation is gorgonia's (gorgonia.org/gorgonia v0.9.18,
// float32, one TapeMachine over a fixed batch shape). Rows are shuffled every
// epoch; the last, short batch of an epoch is padded with zero rows of weight
// 0, so each epoch's loss is the exact mean over its rows. The optimiser is
// Adam (β₁ = 0.9, β₂ = 0.999, ε̂ = 1e-8, bias-corrected), implemented here on
// the raw float32 parameter slices. Initial weights come from the seeded RNG
// (gorgonia's initialisers seed from the clock): He-uniform U(±√(6/fan_in))
// for layers followed by a ReLU, Glorot-uniform U(±√(6/(fan_in+fan_out))) for
// the two output layers, biases 0. Initialisation, shuffling and noise use
// three PCG streams derived from Config.Seed, so training is reproducible
// bit for bit for a given seed, build (BLAS) and machine.
//
// # Inference
//
// [Model.Encode] is a plain float32 forward pass (blas32 GEMMs over batches
// of rows, no autodiff graph) returning the deterministic clipped mean ν(h(x)),
// never a sample. Its output satisfies Σ|z_i| ≤ L for every finite input,
// however large: the clip is computed in float64 with a margin and a
// rigorous rounding check, and a row whose float32 forward pass overflows to
// a non-finite h is recomputed in float64 with power-of-two rescaling between
// layers (exact for a ReLU network up to the bias terms' rounding). NaN or
// ±Inf inputs are errors. A row's output does not depend on the other rows
// of the call.
//
// So the VLM has two forward passes: training runs through the gorgonia
// graph (graph.go), which derives the gradients, and inference through this
// compiled one, which needs none: Encode runs about 515,000 rows/s where a
// training epoch through the graph (forward, backward and Adam) runs about
// 5,600 (measurements in package nn's documentation).
// TestTrainAndEncodePassesAgree checks that the graph's ν(h(x)) and Encode
// agree to float32 rounding on random weights and inputs.
//
// # Speed
//
// Everything is float32. The default build uses gonum's BLAS, with the
// forward passes' float32 products in package nn/sgemm (an AVX2 assembly
// kernel, pure Go in WebAssembly and without AVX2; no cgo), which computes
// the same bits as gonum's Sgemm about seven times faster. Built
// with -tags openblas (Debian: libopenblas-dev; links -lopenblas through
// gonum.org/v1/netlib), blas32, blas64 and gorgonia use OpenBLAS instead,
// process-wide, with three adjustments (blas_openblas.go): OpenBLAS 0.3.21
// does not recognise recent Intel CPUs (e.g. family 6 model 207) and falls
// back to its generic "Prescott" kernels, about 12× slower, so when it
// reports that core and OPENBLAS_CORETYPE is unset the SkylakeX (AVX-512) or
// Haswell (AVX2) kernels are selected instead; OpenBLAS runs single-threaded,
// since its spinning worker threads starve the goroutines doing everything
// else on a small machine; and gorgonia's GEMMs are split by columns across
// GOMAXPROCS goroutines. Encode and Decode split rows into chunks of 256
// across goroutines. The Bernoulli likelihood is one fused gorgonia op
// (bce.go) with its own exp and log1p (1e-9 relative).
package vlm

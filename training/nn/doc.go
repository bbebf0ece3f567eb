// Package nn is the training foundation every trained model of ldpsql is built on: the Adam optimiser,
// the epoch loop (shuffling, minibatches, early stopping, cancellation, progress with rows/s and ETA),
// the one Progress type jobs report, input standardisation and the parallel helpers the models' kernels
// share. A model package (training/vlm, training/classifier, training/spread) keeps only what is
// particular to it: its architecture, its forward and backward passes, its loss and its artifact.
//
// Parameters are flat slices per model (float32, or float64 where a model's precision needs it: the
// spread model's EM), so the optimiser sees one vector. Adam is generic over the parameters' and the
// gradient's float types: the moments are kept in the gradient's precision.
//
// The numeric core stays where it was measured fastest for each model: the VLM and the task-aware
// encoders train through gorgonia graphs built from package nn/graph's layers (the optimiser updates
// their parameter and gradient tensors in place, Adam.StepSegments; DP-SGD's clipped, noised gradient
// is graph.DPGradient), and the classifier's objectives use hand-written passes over feature-major
// blocks whose layer products are nn/sgemm's kernel, one forward pass for training and prediction.
//
// The VLM has two forward passes by choice, the one issue #17 (item 1) allows: gorgonia for training,
// a compiled pass for inference. Training needs the gradients the graph derives (ELBO, ν, KL, the
// per-example clipping probes); writing them by hand would put every encoder's mathematics in a second
// place. Inference needs none of it, and Model.Encode (nn/sgemm or OpenBLAS GEMMs, no graph) encodes
// about 515,000 rows/s (BenchmarkEncode, 1,024 rows of 784, default build; 557,000 with -tags
// openblas; 2 cores shared at load average 15), where a training epoch through the graph runs about
// 5,600 rows/s (forward, backward and Adam: 45,000 images in about 8 s with OpenBLAS, README). The two
// passes are held together by vlm's TestTrainAndEncodePassesAgree (the graph's ν(h(x)) and Encode
// within 1e-5 of the row's ℓ1 norm on random weights and inputs; 2.1e-6 observed).
package nn

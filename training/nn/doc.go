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
// The numeric core stays where it was measured fastest for each model (not re-decided here): the VLM
// and the task-aware encoders train through gorgonia graphs built from package nn/graph's layers (the
// optimiser updates their parameter and gradient tensors in place, Adam.StepSegments), and the VLM
// encodes with BLAS kernels; the classifier's objectives use hand-blocked gonum BLAS kernels over
// feature-major blocks. Unifying the VLM's training and inference passes is left to the models that
// need it (issue #17, item 1, not done: see README).
package nn

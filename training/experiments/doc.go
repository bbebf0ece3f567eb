// Package experiments holds measurements behind the defaults of the trainers and encoders, as tests
// behind the build tag "experiments" (they take minutes and need Fashion-MNIST):
//
//	LDPSQL_DATA=../shared/data go test -tags experiments -run . -v -timeout 60m ./training/experiments/
//
// Each test logs its numbers; none asserts them, because they are measurements to read and to quote,
// not properties of the code.
package experiments

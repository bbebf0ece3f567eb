// Package mechanisms is ldpsql's trust boundary: it turns one individual's
// value into a locally differentially private (LDP) report, and nothing else.
//
// It contains the randomisers and the arithmetic that their guarantees rest
// on:
//
//   - [ClipScalar], [ClipL1] and [ClipBox] force an input into the set whose
//     diameter is the sensitivity a mechanism was calibrated to;
//   - [Laplace] is the local Laplace mechanism (thesis Def 2.3.7), sampled
//     securely on a power-of-two grid as in Google's differential-privacy
//     library, so the floating-point attack of Mironov (2012) does not apply;
//   - [KRR] is K-ary randomised response (thesis Eq 4.7);
//   - [OutputSet] ([L1Ball], [Box]) is the set an encoder declares its
//     outputs to lie in, and [VectorRandomiser] ([NewRandomiser]) a
//     mechanism that clips into such a set and releases an unbiased noisy
//     vector: [VectorLaplace], [Duchi] (Duchi et al. 2018) and [PrivUnit]
//     (PrivUnit₂ + ScalarDP, Bhowmick et al. 2019), and for a Box
//     [CoordinateRR] ("rrB"), randomised response on B bins of each
//     coordinate at ε/D (Barber's per-pixel randomised response, quantised);
//   - [RandomiserCaveat] says when a randomiser releases a set with far
//     more noise than another would (Duchi on an L1Ball: [DuchiOnBallRatio]);
//   - [WarnerEstimate] and [WarnerStdErr] debias frequencies of
//     randomised-response reports;
//   - [Source], [CryptoSource], [NewCryptoSource] and [NewSeededSource] supply
//     the uniform bits.
//
// The package is pure math: no SQL, no I/O other than crypto/rand, and no
// imports from the rest of ldpsql (its one third-party import is gonum's
// incomplete beta function, for PrivUnit). Every mechanism validates its parameters
// at construction and its inputs at each call, and returns an error wrapping
// [ErrInvalidArgument] rather than a result whose guarantee would not hold.
//
// # Privacy parameters
//
// Every ε accepted by this package lies in [MinEpsilon, MaxEpsilon]; +Inf
// ("no privacy") is rejected, callers that want no privacy should not call a
// mechanism. Each mechanism also reports the ε its sampler actually realises
// (EffectiveEpsilon), which is never larger than the requested one.
//
// # Checks
//
// Besides the distribution tests of each sampler, fpleak_test.go checks the
// floating-point claims exactly (with math/big): every Laplace output is a
// multiple of its grid step, inputs that differ in their low-order bits
// give identical releases for the same random bits, and an exact-support
// attacker that is certain of the input on a quarter to nine tenths of a
// textbook sampler's releases is never certain on Laplace's. Package
// mechanisms/audit (and "ldpsql audit") estimates each randomiser's privacy
// loss from samples and tests it against EffectiveEpsilon at confidence
// 1 − 10⁻⁶.
//
// # Randomness
//
// Production code must pass [CryptoSource], or a [NewCryptoSource] of its own
// for a loop of draws on one goroutine. [NewSeededSource] exists only so
// that tests are reproducible; its output is predictable and gives no privacy.
package mechanisms

import (
	"errors"
	"fmt"
	"math"
)

// ErrInvalidArgument is wrapped by every error this package returns: all of
// them are rejected parameters or inputs, never transient failures.
var ErrInvalidArgument = errors.New("mechanisms: invalid argument")

// Bounds on the privacy parameter ε accepted by every mechanism.
//
// MinEpsilon = 2⁻⁵⁰ is the bound Google's library enforces
// (checks.CheckEpsilonVeryStrict); a smaller ε is taken to be a caller's
// mistake (such a report carries essentially no information). The Laplace
// mechanism has a further, dimension-dependent lower bound of roughly
// d·2⁻²⁹, see [NewLaplace].
//
// MaxEpsilon = 64: a likelihood ratio of e⁶⁴ ≈ 6·10²⁷ protects nothing, so a
// larger ε is taken to be a caller's mistake. The bound also keeps every
// probability the samplers work with (the K-RR flip probability is at least
// (K−1)e^{−64}/K ≈ 10⁻²⁸) far inside the normal float64 range, where the
// error analyses in this package hold. Neither mechanism needs a tighter
// bound: the Laplace grid is always 2⁻⁴⁰ of the noise scale whatever ε is.
const (
	MinEpsilon = 0x1p-50
	MaxEpsilon = 64.0
)

// invalid returns an error wrapping ErrInvalidArgument.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// checkEpsilon validates a privacy parameter; who names the caller.
func checkEpsilon(who string, eps float64) error {
	switch {
	case math.IsNaN(eps):
		return invalid("%s: epsilon is NaN", who)
	case math.IsInf(eps, 1):
		return invalid("%s: epsilon = +Inf (no privacy) is not accepted; do not call a mechanism if no privacy is wanted", who)
	case !(eps >= MinEpsilon):
		return invalid("%s: epsilon = %v must be at least MinEpsilon = 2^-50 (and positive)", who, eps)
	case eps > MaxEpsilon:
		return invalid("%s: epsilon = %v exceeds MaxEpsilon = %v (a likelihood ratio of e^%v gives no meaningful privacy)", who, eps, MaxEpsilon, eps)
	}
	return nil
}

// checkFinite reports a NaN or infinite element of v, naming its index.
func checkFinite(who, name string, v []float64) error {
	for i, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return invalid("%s: %s[%d] = %v is not finite", who, name, i, x)
		}
	}
	return nil
}

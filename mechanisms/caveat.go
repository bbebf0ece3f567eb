package mechanisms

import (
	"fmt"
	"math"
)

// MinCaveatRatio is the noise-variance ratio against Laplace above which
// [RandomiserCaveat] speaks up: below twice Laplace's error a choice is a
// trade-off (Duchi's bounded outputs), not a mistake.
const MinCaveatRatio = 2

// DuchiOnBallRatio returns how many times larger the expected squared error
// of Duchi's release of a point of ball is than Laplace's on the same ball
// at eps, for the input Duchi serves best (one of norm l).
//
// Duchi's mechanism releases vectors of the cube [−1, 1]ᵈ, so an ℓ1 ball of
// radius l enters it through its bounding cube [−l, l]ᵈ (t = x/l; see
// [Duchi]). Every released coordinate is ±l·B, B = C_d(e^ε + 1)/(e^ε − 1),
// whatever x is, and the release is unbiased, so
//
//	E‖z − x‖² = E‖z‖² − ‖x‖² = d·l²·B² − ‖x‖₂² ≥ d·l²·B² − l²
//
// (‖x‖₂ ≤ ‖x‖₁ ≤ l). Laplace on the ball adds scale s = 2l/ε to each
// coordinate: E‖z − x‖² = 2·d·s². The ratio is
//
//	(d·B² − 1)·ε²/(8d) = C_d²·((ε/2)·coth(ε/2))²/2 − ε²/(8d),
//
// with C_d² = 13.4 at d = 8, growing like πd/2, and (ε/2)·coth(ε/2) ≥ 1 growing like ε/2: 7.2× at
// d = 8 and ε = 0.7, 31× at ε = 4.2. The cube is the wrong set for a ball:
// its corners, which Duchi reports, lie l·(d − 1) outside the ball in ℓ1.
// For d = 1 the ball is the cube and the ratio is ε²/(8·sinh²(ε/2)) ≤ ½.
func DuchiOnBallRatio(ball L1Ball, eps float64) (float64, error) {
	duchi, err := NewDuchi(ball, eps)
	if err != nil {
		return 0, err
	}
	laplace, err := NewVectorLaplace(ball, eps)
	if err != nil {
		return 0, err
	}
	d, l, b := float64(ball.D), ball.Radius, duchi.B()
	s := laplace.Scales()[0]
	return (d*l*l*b*b - l*l) / (2 * d * s * s), nil
}

// DuchiOnBallMinRatio returns the infimum over ε of [DuchiOnBallRatio] for
// an ℓ1 ball of dimension d: its limit as ε → 0, C_d²/2 (the ratio grows
// with ε for d ≥ 2; for d = 1 it is ≤ ½ and this returns ½).
func DuchiOnBallMinRatio(d int) float64 {
	cd := math.Exp(-duchiLogInvC(d))
	return cd * cd / 2
}

// RandomiserCaveat returns a sentence saying why randomiser name releases
// set at eps with far more noise than another randomiser of this package
// would at the same ε, or "" when it does not (or name, set or eps is
// invalid: [NewRandomiser] says what is wrong with those).
//
// It speaks for Duchi's mechanism on an [L1Ball] when [DuchiOnBallRatio]
// is at least [MinCaveatRatio]; Laplace is the randomiser such an encoder
// was trained for (thesis §6.1). The release stays ε-LDP either way: the
// caveat is about utility only.
func RandomiserCaveat(name string, set OutputSet, eps float64) string {
	if name != RandomiserDuchi {
		return "" // before asBall: LDP_ENCODE asks at every batch, mostly for laplace
	}
	ball, ok := asBall(set)
	if !ok {
		return ""
	}
	duchi, err := NewDuchi(ball, eps)
	if err != nil {
		return ""
	}
	ratio, err := DuchiOnBallRatio(ball, eps)
	if err != nil || ratio < MinCaveatRatio {
		return ""
	}
	return fmt.Sprintf("duchi releases an l1 ball (d = %d, radius %.4g) through its bounding cube [-%.4g, %.4g]^%d: "+
		"at epsilon = %.4g every released coordinate is ±%.4g, %.0f× the noise variance of laplace on the same ball; "+
		"use laplace for an encoder that declares an l1 ball",
		ball.D, ball.Radius, ball.Radius, ball.Radius, ball.D, eps, ball.Radius*duchi.B(), math.Floor(ratio))
}

// RandomiserCaveatAnyEpsilon is [RandomiserCaveat] for a choice made before
// ε is known (a column's default randomiser): it speaks when the caveat
// holds at every ε, with the ratio's lower bound [DuchiOnBallMinRatio].
func RandomiserCaveatAnyEpsilon(name string, set OutputSet) string {
	if name != RandomiserDuchi {
		return "" // before asBall: LDP_ENCODE asks at every batch, mostly for laplace
	}
	ball, ok := asBall(set)
	if !ok {
		return ""
	}
	ratio := DuchiOnBallMinRatio(ball.D)
	if ratio < MinCaveatRatio {
		return ""
	}
	return fmt.Sprintf("duchi releases an l1 ball (d = %d, radius %.4g) through its bounding cube [-%.4g, %.4g]^%d: "+
		"at every epsilon its noise variance is at least %.1f× that of laplace on the same ball, and grows with epsilon; "+
		"use laplace for an encoder that declares an l1 ball",
		ball.D, ball.Radius, ball.Radius, ball.Radius, ball.D, ratio)
}

// asBall returns set as a valid L1Ball (given as a value or a pointer), as the randomisers copy it.
func asBall(set OutputSet) (L1Ball, bool) {
	c, err := copyOutputSet("RandomiserCaveat", set)
	if err != nil {
		return L1Ball{}, false
	}
	ball, ok := c.(L1Ball)
	return ball, ok
}

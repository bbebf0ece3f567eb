package mechanisms

import "math"

// ReleaseEncoding releases one encoder output z through rnd, which clips it into rnd's output set and
// adds the noise: the one step every release of an encoding takes, in the server and on a data owner's
// machine alike. An encoding of the wrong length or with a NaN or ±Inf value is released from the set's
// centre instead (ok is false): ε-LDP like any point of the set, and the statement does not fail, since
// which rows fail would be a channel around the randomiser (a plugin returning NaN only for some inputs
// would reveal them). x is scratch of rnd's dimension.
func ReleaseEncoding(rnd VectorRandomiser, z []float32, x []float64, src Source) (release []float64, ok bool, err error) {
	ok = len(z) == len(x)
	for j := 0; ok && j < len(z); j++ {
		x[j] = float64(z[j])
		ok = !math.IsNaN(x[j]) && !math.IsInf(x[j], 0)
	}
	if !ok {
		Centre(rnd.Set(), x)
	}
	release, err = rnd.Randomise(x, src)
	return release, ok, err
}

// Centre writes the centre of set into x: the origin of an ℓ1 ball, the midpoint of a box.
func Centre(set OutputSet, x []float64) {
	clear(x)
	if b, ok := set.(Box); ok {
		for j := range x {
			x[j] = b.Lo[j] + (b.Hi[j]-b.Lo[j])/2
		}
	}
}

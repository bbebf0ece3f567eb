package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/ldpsql/ldpsql/client"
	"github.com/ldpsql/ldpsql/mechanisms"
)

// releaseMeta is what `ldpsql privatize` (and the Beam transform) records about its releases, beside a
// CSV file (OUT.meta.json) or inside a Parquet file (key-value metadata ldpsql.releases), and what
// import-releases checks.
type releaseMeta = client.Meta

// releaseMetaKeys are the keys every release metadata must have (released_at is only informative).
var releaseMetaKeys = []string{"eps", "eps_x", "eps_y", "k", "label", "lambda", "mechanism", "mechanism_sha256", "model_sha256", "randomiser", "rows"}

// parseReleaseMeta reads release metadata and checks that it describes a release privatize could have
// made: every key present, the digests SHA-256s, a known randomiser, ε within the randomisers' bounds
// and split between features and label as privatize splits it. from names where data came from.
func parseReleaseMeta(data []byte, from string) (releaseMeta, error) {
	var meta releaseMeta
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		return meta, fmt.Errorf("%s: %w", from, err)
	}
	var missing []string
	for _, k := range releaseMetaKeys {
		if _, ok := keys[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return meta, fmt.Errorf("%s lacks %s", from, strings.Join(missing, ", "))
	}
	if err := json.Unmarshal(data, &meta); err != nil {
		return meta, fmt.Errorf("%s: %w", from, err)
	}
	isEps := func(e float64) bool { return e >= mechanisms.MinEpsilon && e <= mechanisms.MaxEpsilon }
	// near allows for metadata written by hand: 0.7·4 typed as 2.8.
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
	switch {
	case meta.Mechanism == "":
		return meta, fmt.Errorf("%s names no mechanism", from)
	case !isSHA256(meta.SHA256):
		return meta, fmt.Errorf("%s: mechanism_sha256 %q is not a SHA-256 digest", from, meta.SHA256)
	case !isSHA256(meta.ModelSHA):
		return meta, fmt.Errorf("%s: model_sha256 %q is not a SHA-256 digest", from, meta.ModelSHA)
	case mechanisms.CheckRandomiserName(meta.Randomiser) != nil:
		return meta, fmt.Errorf("%s: randomiser %q is not one of %s", from, meta.Randomiser, mechanisms.RandomiserNamesText())
	case !isEps(meta.Eps):
		return meta, fmt.Errorf("%s: eps %v is not a release ε", from, meta.Eps)
	case !isEps(meta.EpsX):
		return meta, fmt.Errorf("%s: eps_x %v is not a release ε", from, meta.EpsX)
	case meta.Label != "" && (meta.K < 2 || !isEps(meta.EpsY) || !(meta.Lambda > 0 && meta.Lambda < 1)):
		return meta, fmt.Errorf("%s: a label released with k %d, eps_y %v, lambda %v", from, meta.K, meta.EpsY, meta.Lambda)
	case meta.Label != "" && !(near(meta.EpsX, meta.Lambda*meta.Eps) && near(meta.EpsY, (1-meta.Lambda)*meta.Eps)):
		return meta, fmt.Errorf("%s: eps_x %v and eps_y %v are not lambda·eps and (1 − lambda)·eps for eps %v, lambda %v", from, meta.EpsX, meta.EpsY, meta.Eps, meta.Lambda)
	case meta.Label == "" && !(near(meta.EpsX, meta.Eps) && meta.EpsY == 0):
		return meta, fmt.Errorf("%s: without a label eps_x must be eps and eps_y 0, not eps_x %v, eps_y %v for eps %v", from, meta.EpsX, meta.EpsY, meta.Eps)
	case meta.Rows < 0:
		return meta, fmt.Errorf("%s: rows %d", from, meta.Rows)
	}
	return meta, nil
}

// isSHA256 says whether s is a SHA-256 digest in lower-case hex.
func isSHA256(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == 32 && s == strings.ToLower(s)
}

package main

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// releaseMeta is what `ldpsql privatize` records about its releases, beside a CSV file (OUT.meta.json)
// or inside a Parquet file (key-value metadata ldpsql.releases), and what import-releases checks. The
// fields are in the order of their JSON keys, as the file was written when it was a map.
type releaseMeta struct {
	Eps        float64   `json:"eps"`
	EpsX       float64   `json:"eps_x"`
	EpsY       float64   `json:"eps_y"`
	K          int       `json:"k"`
	Label      string    `json:"label"`
	Lambda     float64   `json:"lambda"`
	Mechanism  string    `json:"mechanism"`
	SHA256     string    `json:"mechanism_sha256"` // of the .ldpm file
	ModelSHA   string    `json:"model_sha256"`     // of the encoder's model in it, which the server holds too
	Randomiser string    `json:"randomiser"`
	ReleasedAt time.Time `json:"released_at"`
	Rows       int       `json:"rows"`
}

// parseReleaseMeta reads release metadata and checks that it names a mechanism and a release ε, and
// for a label its classes and budget split. from names where data came from.
func parseReleaseMeta(data []byte, from string) (releaseMeta, error) {
	var meta releaseMeta
	if err := json.Unmarshal(data, &meta); err != nil {
		return meta, fmt.Errorf("%s: %w", from, err)
	}
	switch {
	case meta.Mechanism == "":
		return meta, fmt.Errorf("%s names no mechanism", from)
	case !(meta.EpsX > 0) || meta.EpsX > 64 || math.IsInf(meta.Eps, 0):
		return meta, fmt.Errorf("%s: eps_x %v is not a release ε", from, meta.EpsX)
	case meta.Label != "" && (meta.K < 2 || !(meta.EpsY > 0) || !(meta.Lambda > 0 && meta.Lambda < 1)):
		return meta, fmt.Errorf("%s: a label released with k %d, eps_y %v, lambda %v", from, meta.K, meta.EpsY, meta.Lambda)
	}
	return meta, nil
}

package udf

import (
	"strconv"

	"github.com/dolthub/go-mysql-server/sql"
)

// Functions returns ldpsql's SQL functions, ready for engine.WithFunctions. Calling it also declares the
// aggregates to GMS's planner.
func Functions() []sql.Function {
	registerAggregates()
	return []sql.Function{
		sql.FunctionN{Name: "flip_label", Fn: NewFlipLabel},
		sql.FunctionN{Name: "ldp_laplace", Fn: NewLDPLaplace},
		sql.FunctionN{Name: "rr_frequency", Fn: NewRRFrequency},
		sql.FunctionN{Name: "private_accuracy", Fn: NewPrivateAccuracy},
		sql.FunctionN{Name: "ldp_accuracy_bound", Fn: NewLDPAccuracyBound},
		sql.FunctionN{Name: "ldp_unit_key", Fn: NewLDPUnitKey},
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

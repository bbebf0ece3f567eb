package taskaware

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The paper's Fig. 3 settings (n = 4, L = I, Assumption 1, λ1 = 4 and λ2:4 = 0, 1, 2; privacy-agnostic
// with Z = 2) in closed form, derived by hand from eqs. 12, 13, 58 and 59 with c = 8(r/ε)²:
//
//	setting 1, λ = (4, 0, 0, 0): Z′ = 1 always; task-aware 4c/(1+c), task-agnostic 16c/(1+4c),
//	  privacy-agnostic 8c/(1+2c).
//	setting 2, λ = (4, 1, 1, 1): eq. 12 at k = 2, 3, 4 is (1 − c)/(k+1) > 0, so Z′ = 4 for c < 1 with
//	  loss 25c/(1+4c), else Z′ = 1 with 4c/(1+c) + 3; task-agnostic 28c/(1+4c); privacy-agnostic
//	  10c/(1+2c) + 2.
//	setting 3, λ = (4, 2, 2, 2): eq. 12 at k ≥ 2 holds for c < √2/(2 − √2) = 1 + √2, where Z′ = 4 and
//	  the loss is (2 + 3√2)²c/(1+4c) = (22 + 12√2)c/(1+4c), else Z′ = 1 with 4c/(1+c) + 6;
//	  task-agnostic 40c/(1+4c); privacy-agnostic 12c/(1+2c) + 4.
//
// The spec's table (Part II.3, "[DERIVED] Reference values") rounds these to 4 decimals; both are checked:
// the package against the exact forms to 1e-12, and the exact forms against the table to its rounding.
func TestClosedFormFig3(t *testing.T) {
	type cell struct {
		rOverEps          float64
		aware             float64
		zPrime            int
		agnostic, privAgn float64
	}
	s2 := math.Sqrt2
	settings := []struct {
		lambda                   []float64
		aware, agnostic, privAgn func(c float64) (float64, int)
		table                    []cell
	}{
		{
			lambda:   []float64{4, 0, 0, 0},
			aware:    func(c float64) (float64, int) { return 4 * c / (1 + c), 1 },
			agnostic: func(c float64) (float64, int) { return 16 * c / (1 + 4*c), 0 },
			privAgn:  func(c float64) (float64, int) { return 8 * c / (1 + 2*c), 0 },
			table: []cell{
				{0.05, 0.0784, 1, 0.2963, 0.1538}, {0.10, 0.2963, 1, 0.9697, 0.5517}, {0.25, 1.3333, 1, 2.6667, 2.0000},
				{0.50, 2.6667, 1, 3.5556, 3.2000}, {1.00, 3.5556, 1, 3.8788, 3.7647},
			},
		},
		{
			lambda: []float64{4, 1, 1, 1},
			aware: func(c float64) (float64, int) {
				if c < 1 {
					return 25 * c / (1 + 4*c), 4
				}
				return 4*c/(1+c) + 3, 1
			},
			agnostic: func(c float64) (float64, int) { return 28 * c / (1 + 4*c), 0 },
			privAgn:  func(c float64) (float64, int) { return 10*c/(1+2*c) + 2, 0 },
			table: []cell{
				{0.05, 0.4630, 4, 0.5185, 2.1923}, {0.10, 1.5152, 4, 1.6970, 2.6897}, {0.25, 4.1667, 4, 4.6667, 4.5000},
				{0.50, 5.6667, 1, 6.2222, 6.0000}, {1.00, 6.5556, 1, 6.7879, 6.7059},
			},
		},
		{
			lambda: []float64{4, 2, 2, 2},
			aware: func(c float64) (float64, int) {
				if c < 1+s2 {
					return (22 + 12*s2) * c / (1 + 4*c), 4
				}
				return 4*c/(1+c) + 6, 1
			},
			agnostic: func(c float64) (float64, int) { return 40 * c / (1 + 4*c), 0 },
			privAgn:  func(c float64) (float64, int) { return 12*c/(1+2*c) + 4, 0 },
			table: []cell{
				{0.05, 0.7217, 4, 0.7407, 4.2308}, {0.10, 2.3619, 4, 2.4242, 4.8276}, {0.25, 6.4951, 4, 6.6667, 7.0000},
				{0.50, 8.6601, 4, 8.8889, 8.8000}, {1.00, 9.5556, 1, 9.6970, 9.6471},
			},
		},
	}
	for si, s := range settings {
		// The exact forms on a fine grid, the package against them.
		for i := 1; i <= 1000; i++ {
			c := 8 * math.Pow(0.001*float64(i), 2)
			want, wz := s.aware(c)
			got, gz := LossTaskAware(s.lambda, c)
			if math.Abs(got-want) > 1e-12 || gz != wz {
				t.Fatalf("setting %d, c = %v: task-aware %v (Z′ %d), exact %v (Z′ %d)", si+1, c, got, gz, want, wz)
			}
			if want, _ := s.agnostic(c); math.Abs(LossTaskAgnostic(s.lambda, c)-want) > 1e-12 {
				t.Fatalf("setting %d, c = %v: task-agnostic %v, exact %v", si+1, c, LossTaskAgnostic(s.lambda, c), want)
			}
			if want, _ := s.privAgn(c); math.Abs(LossPrivacyAgnostic(s.lambda, c, 2)-want) > 1e-12 {
				t.Fatalf("setting %d, c = %v: privacy-agnostic %v, exact %v", si+1, c, LossPrivacyAgnostic(s.lambda, c, 2), want)
			}
		}
		// The spec's rounded table.
		for _, cl := range s.table {
			c := 8 * cl.rOverEps * cl.rOverEps
			got, z := LossTaskAware(s.lambda, c)
			if math.Abs(got-cl.aware) > 5e-5 || z != cl.zPrime {
				t.Errorf("setting %d, r/ε = %v: task-aware %.6f (Z′ %d), table %.4f (%d)", si+1, cl.rOverEps, got, z, cl.aware, cl.zPrime)
			}
			if got := LossTaskAgnostic(s.lambda, c); math.Abs(got-cl.agnostic) > 5e-5 {
				t.Errorf("setting %d, r/ε = %v: task-agnostic %.6f, table %.4f", si+1, cl.rOverEps, got, cl.agnostic)
			}
			if got := LossPrivacyAgnostic(s.lambda, c, 2); math.Abs(got-cl.privAgn) > 5e-5 {
				t.Errorf("setting %d, r/ε = %v: privacy-agnostic %.6f, table %.4f", si+1, cl.rOverEps, got, cl.privAgn)
			}
		}
	}
	// The table's two exact cells and its remarks: setting 1 at r/ε = 0.05 is 0.08/1.02 = 4/51;
	// setting 2's Z′ jumps from 4 to 1 at c = 1 (r/ε = 1/√8) with the loss continuous at 5; setting 3's
	// at c = 1 + √2 (r/ε = 0.54934); the largest improvements of setting 1 over the grid r/ε = 0.01..1
	// are 74.9 % (task-agnostic) and 50.0 % (privacy-agnostic).
	if got, _ := LossTaskAware([]float64{4, 0, 0, 0}, 0.02); math.Abs(got-4.0/51) > 1e-15 {
		t.Errorf("setting 1 at r/ε = 0.05: %v, want 4/51", got)
	}
	for _, c := range []float64{1 - 1e-12, 1 + 1e-12} {
		if got, _ := LossTaskAware([]float64{4, 1, 1, 1}, c); math.Abs(got-5) > 1e-10 {
			t.Errorf("setting 2 at c = %v: %v, want 5 on both sides of the jump", c, got)
		}
	}
	if _, z := LossTaskAware([]float64{4, 2, 2, 2}, (1+s2)*(1-1e-12)); z != 4 {
		t.Errorf("setting 3 just below c = 1 + √2: Z′ %d", z)
	}
	if _, z := LossTaskAware([]float64{4, 2, 2, 2}, (1+s2)*(1+1e-12)); z != 1 {
		t.Errorf("setting 3 just above c = 1 + √2: Z′ %d", z)
	}
	if r := math.Sqrt((1 + s2) / 8); math.Abs(r-0.54934) > 5e-6 {
		t.Errorf("setting 3's jump at r/ε = %v, spec says 0.54934", r)
	}
	var bestAg, bestPa float64
	for i := 1; i <= 100; i++ {
		c := 8 * math.Pow(0.01*float64(i), 2)
		l, _ := LossTaskAware([]float64{4, 0, 0, 0}, c)
		bestAg = max(bestAg, 1-l/LossTaskAgnostic([]float64{4, 0, 0, 0}, c))
		bestPa = max(bestPa, 1-l/LossPrivacyAgnostic([]float64{4, 0, 0, 0}, c, 2))
	}
	if math.Round(1000*bestAg) != 749 || math.Round(1000*bestPa) != 500 {
		t.Errorf("setting 1's largest improvements %.4f and %.4f, spec says 74.9 %% and 50.0 %%", bestAg, bestPa)
	}
}

// Eq. 13 is eq. 9 at the water-filling's scales with σ_w² = c (M = 1), and no other scales with Σσ² = 1
// do better (Prop. 4): random eigenvalues, random c, random feasible competitors.
func TestWaterFillOptimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 12))
	for trial := range 300 {
		n := 1 + rng.IntN(7)
		lambda := make([]float64, n)
		for i := range lambda {
			lambda[i] = rng.ExpFloat64()
		}
		sortDesc(lambda)
		c := math.Exp(4 * rng.NormFloat64())
		s2, z := WaterFill(lambda, c, n)
		sum := 0.0
		for i, v := range s2 {
			if (i < z) != (v > 0) || v < 0 {
				t.Fatalf("trial %d: σ² = %v with Z′ = %d", trial, s2, z)
			}
			sum += v
		}
		if math.Abs(sum-1) > 1e-12 {
			t.Fatalf("trial %d: Σσ² = %v, want 1", trial, sum)
		}
		l13, z13 := LossTaskAware(lambda, c)
		l9 := LossAtNoise(lambda, s2, c)
		if z13 != z || math.Abs(l13-l9) > 1e-12*max(1, l13) {
			t.Fatalf("trial %d (λ %v, c %v): eq. 13 %v (Z′ %d), eq. 9 at the water-filling %v (Z′ %d)", trial, lambda, c, l13, z13, l9, z)
		}
		for range 50 {
			o := make([]float64, n)
			s := 0.0
			for i := range o {
				o[i] = rng.ExpFloat64()
				if rng.IntN(3) == 0 {
					o[i] = 0
				}
				s += o[i]
			}
			if s == 0 {
				continue
			}
			for i := range o {
				o[i] /= s
			}
			if l := LossAtNoise(lambda, o, c); l < l9-1e-12 {
				t.Fatalf("trial %d: scales %v have loss %v < the water-filling's %v", trial, o, l, l9)
			}
		}
		// The cap: with zmax = 1 the single scale is 1 and the loss is λ1 c/(1+c) + Σ_{i>1} λ_i.
		s1, z1 := WaterFill(lambda, c, 1)
		want := lambda[0]*c/(1+c) + sumPos(lambda[1:])
		if z1 != 1 || math.Abs(s1[0]-1) > 1e-12 || math.Abs(LossAtNoise(lambda, s1, c)-want) > 1e-12*max(1, want) {
			t.Fatalf("trial %d: capped at 1: %v %d", trial, s1, z1)
		}
	}
}

// Under Assumption 1 (Δ1 = 2r√Σσ², Prop. 3) the search over c finds the paper's design: c = 8r²/ε²,
// with eq. 13's loss.
func TestOptimiseDesignSphere(t *testing.T) {
	lambda := []float64{4, 2.5, 1, 0.3, 0.05}
	for _, tc := range []struct{ r, eps float64 }{{1, 20}, {1, 5}, {0.3, 1}, {2, 3}} {
		sphere := func(sigma []float64) (float64, error) {
			s := 0.0
			for _, v := range sigma {
				s += v * v
			}
			return 2 * tc.r * math.Sqrt(s), nil
		}
		c := 8 * tc.r * tc.r / (tc.eps * tc.eps)
		want, wz := LossTaskAware(lambda, c)
		d, err := OptimiseDesign(lambda, len(lambda), tc.eps, sphere)
		if err != nil {
			t.Fatal(err)
		}
		if d.ZPrime != wz || math.Abs(d.Loss-want) > 1e-9*want || math.Abs(d.NoiseVar-c) > 1e-12*c {
			t.Errorf("r = %v, ε = %v: design c = %v (Z′ %d), loss %v; the paper's c = %v (Z′ %d), loss %v", tc.r, tc.eps, d.C, d.ZPrime, d.Loss, c, wz, want)
		}
		if math.Abs(math.Log(d.C/c)) > 1e-3 {
			t.Errorf("r = %v, ε = %v: design c = %v, the paper's %v", tc.r, tc.eps, d.C, c)
		}
		t.Logf("r = %v, ε = %v: c = %.6g (paper %.6g), Z′ = %d, loss %.9g (eq. 13 %.9g)", tc.r, tc.eps, d.C, c, d.ZPrime, d.Loss, want)
	}
}

func sortDesc(v []float64) {
	for i := range v {
		for j := i + 1; j < len(v); j++ {
			if v[j] > v[i] {
				v[i], v[j] = v[j], v[i]
			}
		}
	}
}

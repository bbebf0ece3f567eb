package vlm

import (
	"github.com/ldpsql/ldpsql/training/nn/graph"

	"math"
	"math/rand/v2"
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ldpsql/ldpsql/training/nn"
)

// evalGraph builds a float64 graph with the given parameter values (matrices
// of shape rows×cols, or scalars when cols == 0), runs it and returns the
// cost and the gradients w.r.t. every parameter.
type gparam struct {
	rows, cols int
	v          []float64
}

func evalGraph(t *testing.T, build func(g *G.ExprGraph, ps []*G.Node) (*G.Node, error), params ...gparam) (float64, [][]float64) {
	t.Helper()
	g := G.NewGraph()
	var nodes []*G.Node
	for i, p := range params {
		var n *G.Node
		if p.cols == 0 {
			n = G.NewScalar(g, tensor.Float64, G.WithName(string(rune('a'+i))), G.WithValue(p.v[0]))
		} else {
			v := append([]float64(nil), p.v...)
			n = G.NewMatrix(g, tensor.Float64, G.WithShape(p.rows, p.cols), G.WithName(string(rune('a'+i))),
				G.WithValue(tensor.New(tensor.WithShape(p.rows, p.cols), tensor.WithBacking(v))))
		}
		nodes = append(nodes, n)
	}
	cost, err := build(g, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := G.Grad(cost, nodes...); err != nil {
		t.Fatal(err)
	}
	vm := G.NewTapeMachine(g, G.BindDualValues(nodes...))
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	var grads [][]float64
	for _, n := range nodes {
		gv, err := n.Grad()
		if err != nil {
			t.Fatal(err)
		}
		switch gv := gv.(type) {
		case *tensor.Dense:
			grads = append(grads, append([]float64(nil), gv.Data().([]float64)...))
		case *G.F64:
			grads = append(grads, []float64{float64(*gv)})
		default:
			t.Fatalf("gradient type %T", gv)
		}
	}
	return cost.Value().Data().(float64), grads
}

// klClosed is the closed-form KL(Laplace(μ, b) ‖ Laplace(0, b₀)).
func klClosed(mu, b float64) float64 {
	b0 := priorScale
	return math.Log(b0/b) + math.Abs(mu)/b0 + b/b0*math.Exp(-math.Abs(mu)/b) - 1
}

// klQuadrature integrates q·log(q/p) numerically (independent of the closed
// form): Simpson's rule on [μ − 60b, μ + 60b] ∪ the prior's bulk, split at
// the kinks 0 and μ.
func klQuadrature(mu, b float64) float64 {
	b0 := priorScale
	f := func(z float64) float64 {
		lq := -math.Log(2*b) - math.Abs(z-mu)/b
		lp := -math.Log(2*b0) - math.Abs(z)/b0
		return math.Exp(lq) * (lq - lp)
	}
	simpson := func(a, c float64, n int) float64 {
		h := (c - a) / float64(n)
		s := f(a) + f(c)
		for i := 1; i < n; i++ {
			w := 2.0
			if i%2 == 1 {
				w = 4
			}
			s += w * f(a+float64(i)*h)
		}
		return s * h / 3
	}
	lo, hi := mu-60*b, mu+60*b
	pts := []float64{lo}
	for _, k := range []float64{min(0, mu), max(0, mu)} {
		if k > lo && k < hi {
			pts = append(pts, k)
		}
	}
	pts = append(pts, hi)
	var s float64
	for i := 0; i+1 < len(pts); i++ {
		if pts[i+1] > pts[i] {
			s += simpson(pts[i], pts[i+1], 200000)
		}
	}
	return s
}

func TestLaplaceKLValueAndGradients(t *testing.T) {
	cases := []struct{ mu, b float64 }{
		{0, 1 / math.Sqrt2}, // KL = 0 exactly
		{0.3, 0.5},
		{-1.7, 0.2},
		{4.2, 2.857},
		{-0.05, 0.01},
		{9.5, 1.429},
	}
	for _, c := range cases {
		// Closed form against quadrature.
		if got, want := klClosed(c.mu, c.b), klQuadrature(c.mu, c.b); math.Abs(got-want) > 1e-6*(1+math.Abs(want)) {
			t.Errorf("μ=%v b=%v: closed form %v, quadrature %v", c.mu, c.b, got, want)
		}
		// Graph value and gradients (μ as a 1×1 matrix, b as a scalar,
		// log b = Log(b) so the gradient w.r.t. b flows through both).
		build := func(g *G.ExprGraph, ps []*G.Node) (*G.Node, error) {
			logb, err := G.Log(ps[1])
			if err != nil {
				return nil, err
			}
			return laplaceKL(ps[0], ps[1], logb)
		}
		kl, grads := evalGraph(t, build, gparam{1, 1, []float64{c.mu}}, gparam{v: []float64{c.b}})
		if want := klClosed(c.mu, c.b); math.Abs(kl-want) > 1e-12*(1+math.Abs(want)) {
			t.Errorf("μ=%v b=%v: graph KL %v, closed form %v", c.mu, c.b, kl, want)
		}
		const h = 1e-6
		dmu := (klClosed(c.mu+h, c.b) - klClosed(c.mu-h, c.b)) / (2 * h)
		db := (klClosed(c.mu, c.b+h*c.b) - klClosed(c.mu, c.b-h*c.b)) / (2 * h * c.b)
		if c.mu == 0 {
			dmu = 0 // the subgradient gorgonia takes at the kink: |·|'(0) = sign(0) = 0
		}
		if math.Abs(grads[0][0]-dmu) > 1e-6*(1+math.Abs(dmu)) {
			t.Errorf("μ=%v b=%v: ∂KL/∂μ graph %v, finite difference %v", c.mu, c.b, grads[0][0], dmu)
		}
		if math.Abs(grads[1][0]-db) > 1e-6*(1+math.Abs(db)) {
			t.Errorf("μ=%v b=%v: ∂KL/∂b graph %v, finite difference %v", c.mu, c.b, grads[1][0], db)
		}
	}
	// A batch: the KL sums over rows and dimensions.
	mu := []float64{0.1, -0.2, 3, 0, -5, 0.7}
	b := 0.4
	kl, grads := evalGraph(t, func(g *G.ExprGraph, ps []*G.Node) (*G.Node, error) {
		logb, err := G.Log(ps[1])
		if err != nil {
			return nil, err
		}
		return laplaceKL(ps[0], ps[1], logb)
	}, gparam{2, 3, mu}, gparam{v: []float64{b}})
	var want, wantDb float64
	for _, m := range mu {
		want += klClosed(m, b)
		wantDb += (klClosed(m, b*(1+1e-7)) - klClosed(m, b*(1-1e-7))) / (2e-7 * b)
	}
	if math.Abs(kl-want) > 1e-12*want {
		t.Errorf("batch KL %v, want %v", kl, want)
	}
	if math.Abs(grads[1][0]-wantDb) > 1e-6*(1+math.Abs(wantDb)) {
		t.Errorf("batch ∂KL/∂b %v, want %v", grads[1][0], wantDb)
	}
}

// nuRef is ν(h) = h·min(1, l/‖h‖₁) in float64.
func nuRef(h []float64, l float64) []float64 {
	var n float64
	for _, v := range h {
		n += math.Abs(v)
	}
	out := make([]float64, len(h))
	for i, v := range h {
		out[i] = v / max(1, n/l)
	}
	return out
}

func TestNuValueAndGradient(t *testing.T) {
	const l = 10.0
	r := rand.New(rand.NewPCG(7, 7))
	const d = 5
	coef := make([]float64, d) // cost = Σ cᵢ·ν(h)ᵢ
	for i := range coef {
		coef[i] = r.NormFloat64()
	}
	cost := func(h []float64) float64 {
		var s float64
		for i, v := range nuRef(h, l) {
			s += coef[i] * v
		}
		return s
	}
	build := func(g *G.ExprGraph, ps []*G.Node) (*G.Node, error) {
		nu, err := graph.NuL1(ps[0], l)
		if err != nil {
			return nil, err
		}
		c := G.NewMatrix(g, tensor.Float64, G.WithShape(1, d), G.WithName("c"),
			G.WithValue(tensor.New(tensor.WithShape(1, d), tensor.WithBacking(append([]float64(nil), coef...)))))
		p, err := G.HadamardProd(nu, c)
		if err != nil {
			return nil, err
		}
		return G.Sum(p)
	}
	scaled := func(norm float64) []float64 { // random direction with ‖h‖₁ = norm
		h := make([]float64, d)
		var n float64
		for i := range h {
			h[i] = r.NormFloat64()
			n += math.Abs(h[i])
		}
		for i := range h {
			h[i] *= norm / n
		}
		return h
	}
	fd := func(h []float64, i int, step float64) (central, fwd, bwd float64) {
		hp, hm := append([]float64(nil), h...), append([]float64(nil), h...)
		hp[i] += step
		hm[i] -= step
		c0 := cost(h)
		return (cost(hp) - cost(hm)) / (2 * step), (cost(hp) - c0) / step, (c0 - cost(hm)) / step
	}
	type tc struct {
		name     string
		h        []float64
		boundary bool
	}
	cases := []tc{
		{"inside", scaled(3), false},
		{"outside", scaled(37), false},
		{"far outside", scaled(1e6), false},
		{"just inside", scaled(l * (1 - 1e-4)), false},
		{"just outside", scaled(l * (1 + 1e-4)), false},
		{"near zero", scaled(1e-9), false},
		{"zero", make([]float64, d), false},
		{"on boundary", []float64{4, -3, 2, -0.5, 0.5}, true}, // ‖h‖₁ = 10 exactly
	}
	for _, c := range cases {
		val, grads := evalGraph(t, build, gparam{1, d, c.h})
		if want := cost(c.h); math.Abs(val-want) > 1e-12*(1+math.Abs(want)) {
			t.Errorf("%s: ν cost %v, want %v", c.name, val, want)
		}
		nrm := 0.0
		for _, v := range nuRef(c.h, l) {
			nrm += math.Abs(v)
		}
		if nrm > l*(1+1e-15) {
			t.Errorf("%s: ‖ν(h)‖₁ = %v > l", c.name, nrm)
		}
		for i := range c.h {
			step := 1e-6 * max(1e-3, math.Abs(c.h[i]))
			if c.name == "near zero" || c.name == "zero" {
				step = 1e-12
			}
			central, fwd, bwd := fd(c.h, i, step)
			got := grads[0][i]
			tol := 1e-5 * (1 + math.Abs(central))
			if !c.boundary {
				if math.Abs(got-central) > tol {
					t.Errorf("%s: ∂/∂h[%d] graph %v, finite difference %v", c.name, i, got, central)
				}
				continue
			}
			// On the boundary ν has a kink: the graph must give one of the
			// one-sided derivatives (gorgonia's relu'(0) = 1 picks the
			// outer, rescaling branch when moving outward).
			if math.Abs(got-fwd) > tol && math.Abs(got-bwd) > tol {
				t.Errorf("%s: ∂/∂h[%d] graph %v, one-sided differences %v (+) and %v (−)", c.name, i, got, fwd, bwd)
			}
		}
	}
}

func TestStdLaplace(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const n = 200000
	var s, s2, abs float64
	for range n {
		x := nn.StdLaplace(r)
		if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > 40 {
			t.Fatalf("sample %v", x)
		}
		s += x
		s2 += x * x
		abs += math.Abs(x)
	}
	// Laplace(0, 1): mean 0, variance 2, E|x| = 1.
	if m := s / n; math.Abs(m) > 0.02 {
		t.Errorf("mean %v", m)
	}
	if v := s2 / n; math.Abs(v-2) > 0.05 {
		t.Errorf("variance %v, want 2", v)
	}
	if a := abs / n; math.Abs(a-1) > 0.01 {
		t.Errorf("E|x| = %v, want 1", a)
	}
}

func TestBCEValueAndGradient(t *testing.T) {
	// Logits from tiny to extreme; targets in [0, 1].
	a := []float64{0, 1e-9, -3, 2.5, 40, -40, 800, -800, 0.7, -0.2, 15, -15}
	x := []float64{0.5, 1, 0, 0.3, 1, 0, 0.9, 0.1, 0.7, 0.2, 0, 1}
	const rows, cols = 3, 4
	ref := func(a []float64) []float64 { // Σ_f softplus(a) − x·a per row, in float64
		out := make([]float64, rows)
		for k, v := range a {
			sp := math.Max(v, 0) + math.Log1p(math.Exp(-math.Abs(v)))
			out[k/cols] += sp - x[k]*v
		}
		return out
	}
	coef := []float64{1.5, -0.5, 2} // cost = Σ_r coef_r·bce_r, so the upstream gradient varies by row
	cost := func(a []float64) float64 {
		var s float64
		for r, v := range ref(a) {
			s += coef[r] * v
		}
		return s
	}
	val, grads := evalGraph(t, func(g *G.ExprGraph, ps []*G.Node) (*G.Node, error) {
		xn := G.NewMatrix(g, tensor.Float64, G.WithShape(rows, cols), G.WithName("x"),
			G.WithValue(tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(append([]float64(nil), x...)))))
		b, err := bceRows(ps[0], xn)
		if err != nil {
			return nil, err
		}
		c := G.NewVector(g, tensor.Float64, G.WithShape(rows), G.WithName("c"),
			G.WithValue(tensor.New(tensor.WithShape(rows), tensor.WithBacking(append([]float64(nil), coef...)))))
		return G.Mul(b, c)
	}, gparam{rows, cols, a})
	if want := cost(a); math.Abs(val-want) > 1e-9*math.Abs(want) {
		t.Errorf("bce cost %v, want %v", val, want)
	}
	for k := range a {
		h := 1e-6 * max(1, math.Abs(a[k]))
		ap, am := append([]float64(nil), a...), append([]float64(nil), a...)
		ap[k] += h
		am[k] -= h
		fd := (cost(ap) - cost(am)) / (2 * h)
		if math.Abs(grads[0][k]-fd) > 1e-6*(1+math.Abs(fd)) {
			t.Errorf("∂/∂a[%d] (a = %v): graph %v, finite difference %v", k, a[k], grads[0][k], fd)
		}
	}
	// float32 agrees with the float64 reference.
	for _, v := range []float32{0, 1e-30, -1e-30, 3, -3, 17, -17, 88, -88, 1e30, -1e30} {
		sp, sg := softplusSigmoid(float64(v))
		wantSp := math.Max(float64(v), 0) + math.Log1p(math.Exp(-math.Abs(float64(v))))
		wantSg := 1 / (1 + math.Exp(-float64(v)))
		if math.Abs(sp-wantSp) > 1e-9*max(1, wantSp) || math.Abs(sg-wantSg) > 1e-9*wantSg {
			t.Errorf("softplusSigmoid(%v) = %v, %v; want %v, %v", v, sp, sg, wantSp, wantSg)
		}
	}
}

func TestFastExpLog1p(t *testing.T) {
	var worstE, worstL float64
	for x := 0.0; x >= -708; x -= 0.000731 {
		got, want := expNonPos(x), math.Exp(x)
		if rel := math.Abs(got-want) / want; rel > worstE {
			worstE = rel
		}
	}
	for e := 0.0; e <= 1; e += 1.7e-6 {
		got, want := log1pUnit(e), math.Log1p(e)
		if want > 0 {
			if rel := math.Abs(got-want) / want; rel > worstL {
				worstL = rel
			}
		} else if got != 0 {
			t.Fatalf("log1pUnit(0) = %v", got)
		}
	}
	if worstE > 5e-10 || worstL > 5e-10 {
		t.Errorf("worst relative errors: exp %g, log1p %g", worstE, worstL)
	}
	t.Logf("worst relative errors: exp %g, log1p %g", worstE, worstL)
	if expNonPos(-709) != 0 || expNonPos(math.Inf(-1)) != 0 || expNonPos(0) != 1 {
		t.Error("expNonPos edge cases")
	}
}

// refELBO is the weighted −ELBO of the training graph written directly in
// float64, with every parameter in one flat slice in the order of
// trainGraph.params (encoder W, b, …, decoder W, b, …, then log b if learnt).
func refELBO(m *Model, p []float64, x, xi [][]float64, w []float64) float64 {
	off := 0
	next := func(n int) []float64 { s := p[off : off+n]; off += n; return s }
	type lay struct {
		In, Out int
		W, B    []float64
	}
	var enc, dec []lay
	for _, l := range m.enc {
		enc = append(enc, lay{l.In, l.Out, next(l.In * l.Out), next(l.Out)})
	}
	for _, l := range m.dec {
		dec = append(dec, lay{l.In, l.Out, next(l.In * l.Out), next(l.Out)})
	}
	b := float64(m.bTrain)
	logb := math.Log(b)
	if m.cfg.EpsPretrain == 0 {
		logb = p[off]
		b = math.Exp(logb)
	}
	fwd := func(ls []lay, v []float64) []float64 {
		for li, l := range ls {
			y := make([]float64, l.Out)
			for j := range y {
				y[j] = l.B[j]
				for i := range v {
					y[j] += v[i] * l.W[i*l.Out+j]
				}
				if li < len(ls)-1 {
					y[j] = max(y[j], 0)
				}
			}
			v = y
		}
		return v
	}
	var loss float64
	for r := range x {
		mu := nuRef(fwd(enc, x[r]), m.cfg.L)
		z := make([]float64, len(mu))
		var kl float64
		for i := range mu {
			z[i] = mu[i] + b*xi[r][i]
			kl += math.Log(priorScale) - logb + math.Abs(mu[i])/priorScale + b/priorScale*math.Exp(-math.Abs(mu[i])/b) - 1
		}
		a := fwd(dec, z)
		var nll float64
		for f := range a {
			if m.cfg.Likelihood == Bernoulli {
				nll += math.Max(a[f], 0) + math.Log1p(math.Exp(-math.Abs(a[f]))) - x[r][f]*a[f]
			} else {
				d := x[r][f] - a[f]
				nll += 0.5*d*d + 0.5*math.Log(2*math.Pi)
			}
		}
		loss += w[r] * (nll + kl)
	}
	return loss
}

// TestTrainGraphEndToEnd checks the whole training graph (float64 build):
// its loss against refELBO and its gradient w.r.t. every parameter against
// central finite differences of refELBO, for the MLP with a learnt scale, the
// Gaussian likelihood with a fixed scale, and the linear VLM, with rows
// inside and outside the ℓ1 ball and a zero-weight padding row.
func TestTrainGraphEndToEnd(t *testing.T) {
	for _, cfg := range []Config{
		{D: 3, L: 1.5, Hidden: []int{5, 4}},
		{D: 2, L: 0.8, Hidden: []int{4}, Likelihood: Gaussian, EpsPretrain: 4},
		{D: 2, L: 2, Linear: true, EpsPretrain: 7},
	} {
		cfg = cfg.withDefaults()
		const in, bs = 6, 4
		m := randomModel(9, cfg, in)
		for _, l := range m.layers() { // larger weights: some rows land outside the ball
			for k := range l.W {
				l.W[k] *= 2
			}
		}
		r := rand.New(rand.NewPCG(4, 4))
		x, xi := make([][]float64, bs), make([][]float64, bs)
		for i := range x {
			x[i], xi[i] = make([]float64, in), make([]float64, cfg.D)
			for f := range x[i] {
				x[i][f] = r.Float64()
				if cfg.Likelihood == Gaussian {
					x[i][f] = 2*x[i][f] - 1
				}
			}
			for k := range xi[i] {
				xi[i][k] = nn.StdLaplace(r)
			}
		}
		w := []float64{1.0 / 3, 1.0 / 3, 1.0 / 3, 0}
		// Put L between the rows' ‖h‖₁ so that one real row is inside the
		// ball and two are outside.
		var norms []float64
		for _, row := range x[:3] {
			r32 := make([]float32, in)
			for f, v := range row {
				r32[f] = float32(v)
			}
			a, s := forwardScaled(m.enc, r32)
			var n float64
			for _, v := range a {
				n += math.Abs(math.Ldexp(v, s))
			}
			norms = append(norms, n)
		}
		slices.Sort(norms)
		m.cfg.L = (norms[0] + norms[1]) / 2

		tg, err := newTrainGraphOf(tensor.Float64, m, bs)
		if err != nil {
			t.Fatal(err)
		}
		flat := func(v [][]float64) []float64 {
			var s []float64
			for _, r := range v {
				s = append(s, r...)
			}
			return s
		}
		for _, in := range []struct {
			n *G.Node
			v []float64
		}{{tg.x, flat(x)}, {tg.xi, flat(xi)}, {tg.w, w}} {
			if err := G.Let(in.n, tensor.New(tensor.WithShape(in.n.Shape()...), tensor.WithBacking(in.v))); err != nil {
				t.Fatal(err)
			}
		}
		vm := G.NewTapeMachine(tg.g, G.BindDualValues(tg.params...))
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		var p, grad []float64
		for _, n := range tg.params {
			switch v := n.Value().(type) {
			case *tensor.Dense:
				p = append(p, v.Data().([]float64)...)
			case *G.F64:
				p = append(p, float64(*v))
			}
			gv, err := n.Grad()
			if err != nil {
				t.Fatal(err)
			}
			switch v := gv.(type) {
			case *tensor.Dense:
				grad = append(grad, v.Data().([]float64)...)
			case *G.F64:
				grad = append(grad, float64(*v))
			}
		}
		vm.Close()
		// The padding row (w = 0) skipped by the bce ops (tg.live = 3): the same loss and gradients,
		// bit for bit.
		if cfg.Likelihood != Gaussian {
			tg2, err := newTrainGraphOf(tensor.Float64, m, bs)
			if err != nil {
				t.Fatal(err)
			}
			tg2.live = 3
			for _, in := range []struct {
				n *G.Node
				v []float64
			}{{tg2.x, flat(x)}, {tg2.xi, flat(xi)}, {tg2.w, w}} {
				if err := G.Let(in.n, tensor.New(tensor.WithShape(in.n.Shape()...), tensor.WithBacking(in.v))); err != nil {
					t.Fatal(err)
				}
			}
			vm2 := G.NewTapeMachine(tg2.g, G.BindDualValues(tg2.params...))
			if err := vm2.RunAll(); err != nil {
				t.Fatal(err)
			}
			var grad2 []float64
			for _, n := range tg2.params {
				gv, err := n.Grad()
				if err != nil {
					t.Fatal(err)
				}
				switch v := gv.(type) {
				case *tensor.Dense:
					grad2 = append(grad2, v.Data().([]float64)...)
				case *G.F64:
					grad2 = append(grad2, float64(*v))
				}
			}
			l1, l2 := tg.loss.Value().Data().(float64), tg2.loss.Value().Data().(float64)
			vm2.Close()
			if l1 != l2 || !slices.Equal(grad, grad2) {
				t.Errorf("%+v: skipping the padding row changed the loss (%v, %v) or the gradients", cfg, l1, l2)
			}
		}
		if len(p) != len(grad) {
			t.Fatalf("%d parameters, %d gradients", len(p), len(grad))
		}
		// Some rows must be clipped for the test to cover ν's outer branch.
		clipped := 0
		for i := range x[:3] {
			var n float64
			for _, v := range refEncoderH(m, p, x[i]) {
				n += math.Abs(v)
			}
			if n > m.cfg.L {
				clipped++
			}
		}
		got := tg.loss.Value().Data().(float64)
		want := refELBO(m, p, x, xi, w)
		if math.Abs(got-want) > 1e-10*math.Abs(want) {
			t.Errorf("%+v: graph loss %v, reference %v", cfg, got, want)
		}
		worst := 0.0
		for k := range p {
			h := 1e-6 * max(1, math.Abs(p[k]))
			pp, pm := append([]float64(nil), p...), append([]float64(nil), p...)
			pp[k] += h
			pm[k] -= h
			fd := (refELBO(m, pp, x, xi, w) - refELBO(m, pm, x, xi, w)) / (2 * h)
			e := math.Abs(grad[k]-fd) / (1 + math.Abs(fd))
			worst = max(worst, e)
			if e > 1e-5 {
				t.Errorf("%+v: ∂loss/∂p[%d] graph %v, finite difference %v", cfg, k, grad[k], fd)
			}
		}
		t.Logf("%s linear=%v: %d parameters, %d of 3 rows clipped, loss %.6f, worst gradient error %.2g",
			cfg.Likelihood, cfg.Linear, len(p), clipped, got, worst)
		if clipped != 2 {
			t.Errorf("%+v: %d of 3 rows outside the ball; want a mix", cfg, clipped)
		}
	}
}

// refEncoderH is the encoder's pre-ν output h(x) from the flat parameters.
func refEncoderH(m *Model, p []float64, x []float64) []float64 {
	off := 0
	v := x
	for li, l := range m.enc {
		w, b := p[off:off+l.In*l.Out], p[off+l.In*l.Out:off+l.In*l.Out+l.Out]
		off += l.In*l.Out + l.Out
		y := make([]float64, l.Out)
		for j := range y {
			y[j] = b[j]
			for i := range v {
				y[j] += v[i] * w[i*l.Out+j]
			}
			if li < len(m.enc)-1 {
				y[j] = max(y[j], 0)
			}
		}
		v = y
	}
	return v
}

// TestTrainAndEncodePassesAgree: the VLM has two forward passes, the gorgonia training graph and the
// BLAS inference pass of Model.Encode (package documentation, "Inference"); on random weights and
// inputs, rows inside and outside the ℓ1 ball, the graph's ν(h(x)) and Encode's output agree to
// float32 rounding (relative 1e-5 of the row's ℓ1 norm, well above the few ulps that the two
// summation orders give, far below any wrong layer, bias or clip).
func TestTrainAndEncodePassesAgree(t *testing.T) {
	for _, cfg := range []Config{
		{D: 3, L: 1.5, Hidden: []int{7, 5}},
		{D: 4, L: 12, Hidden: []int{6}, Likelihood: Gaussian, EpsPretrain: 4},
		{D: 2, L: 2, Linear: true, EpsPretrain: 7},
	} {
		const in, bs = 9, 16
		m := randomModel(21, cfg, in)
		r := rand.New(rand.NewPCG(8, 8))
		x, xi, w := make([]float32, bs*in), make([]float32, bs*m.cfg.D), make([]float32, bs)
		rows := make([][]float32, bs)
		for i := range rows {
			scale := 3.0 // odd rows large (clipped), even rows small (inside the ball)
			if i%2 == 0 {
				scale = 0.01
			}
			for f := range in {
				x[i*in+f] = float32(scale * r.NormFloat64())
			}
			rows[i] = x[i*in : (i+1)*in]
			w[i] = 1
		}
		tg, err := newTrainGraph(m, bs)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []struct {
			n *G.Node
			v []float32
		}{{tg.x, x}, {tg.xi, xi}, {tg.w, w}} {
			if err := G.Let(v.n, tensor.New(tensor.WithShape(v.n.Shape()...), tensor.WithBacking(v.v))); err != nil {
				t.Fatal(err)
			}
		}
		tg.live = bs
		var muV G.Value // read during the run: later ops may reuse the node's memory
		G.Read(tg.mu, &muV)
		vm := G.NewTapeMachine(tg.g, G.BindDualValues(tg.params...))
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		mu, err := graph.F32s(muV)
		if err != nil {
			t.Fatal(err)
		}
		mu = slices.Clone(mu)
		vm.Close()
		z, err := m.Encode(rows)
		if err != nil {
			t.Fatal(err)
		}
		inside, worst := 0, 0.0
		for i, zr := range z {
			l1 := 0.0
			for _, v := range zr {
				l1 += math.Abs(float64(v))
			}
			if l1 < 0.999*m.cfg.L {
				inside++
			}
			for k, v := range zr {
				g := mu[i*m.cfg.D+k]
				e := math.Abs(float64(g-v)) / max(l1, 1e-3)
				if e > 1e-5 {
					t.Fatalf("%+v: row %d, z[%d]: graph %v, Encode %v", cfg, i, k, g, v)
				}
				worst = max(worst, e)
			}
		}
		t.Logf("D=%d hidden %v linear %v: %d of %d rows inside the ball, worst difference %.2g·‖z‖₁", m.cfg.D, m.cfg.Hidden, m.cfg.Linear, inside, bs, worst)
		if inside == 0 || inside == bs {
			t.Errorf("%+v: %d of %d rows inside the ball: the test should see both sides of the clip", cfg, inside, bs)
		}
	}
}

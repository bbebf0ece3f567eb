package mechanisms

import (
	"fmt"
	"sync"
	"testing"
)

// benchmarkRandomise times Randomise on the unit box [0, 1]ᵈ (MNIST-like
// pixels at d = 784) at ε = 4, with the production CryptoSource.
func benchmarkRandomise(b *testing.B, name string) {
	for _, d := range []int{8, 784} {
		b.Run(fmt.Sprintf("d=%d", d), func(b *testing.B) {
			r := mustRandomiser(b, name, Box{Lo: make([]float64, d), Hi: onesVec(d)}, 4)
			x := make([]float64, d)
			for j := range x {
				x[j] = float64(j%11) / 10
			}
			src := CryptoSource()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Randomise(x, src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRandomiseLaplace(b *testing.B)  { benchmarkRandomise(b, RandomiserLaplace) }
func BenchmarkRandomiseDuchi(b *testing.B)    { benchmarkRandomise(b, RandomiserDuchi) }
func BenchmarkRandomisePrivUnit(b *testing.B) { benchmarkRandomise(b, RandomiserPrivUnit) }

// BenchmarkNewPrivUnit times the parameter search (cache cleared each
// time) at d = 784, ε = 4.
func BenchmarkNewPrivUnit(b *testing.B) {
	box := Box{Lo: make([]float64, 784), Hi: onesVec(784)}
	for b.Loop() {
		privUnitCache.Lock()
		clear(privUnitCache.m)
		privUnitCache.Unlock()
		if _, err := NewPrivUnit(box, 4); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCryptoSources times 10⁵ words from the shared CryptoSource and from a NewCryptoSource, on
// one goroutine and on two at once (as two batches of releases are randomised).
//
//	go test -run '^$' -bench CryptoSources ./mechanisms/
func BenchmarkCryptoSources(b *testing.B) {
	const words = 100_000
	for _, tc := range []struct {
		name string
		src  func() Source
	}{{"shared", CryptoSource}, {"local", NewCryptoSource}} {
		for _, goroutines := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", tc.name, goroutines), func(b *testing.B) {
				for b.Loop() {
					var wg sync.WaitGroup
					for range goroutines {
						wg.Add(1)
						go func() {
							defer wg.Done()
							src := tc.src()
							for range words {
								src.Uint64()
							}
						}()
					}
					wg.Wait()
				}
			})
		}
	}
}

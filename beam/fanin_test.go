package beam

import (
	"errors"
	"testing"
	"time"
)

// A worker's error fails the bundle; a worker still producing must not stay blocked on the full output
// channel when the bundle is abandoned at that error (no drain), and a drained failed bundle leaves the
// fanIn ready for the next one.
func TestFanInFailedBundleLeavesNoBlockedWorker(t *testing.T) {
	var f fanIn[int]
	f.setup()
	f.slots = make(chan struct{}, 2)
	var emitted int
	emit := func(int) { emitted++ }
	producing := func(send func(int)) error {
		for i := range 10 * cap(f.out) {
			send(i)
		}
		return nil
	}
	boom := errors.New("a bad part")
	if err := f.start(producing, emit); err != nil {
		t.Fatal(err)
	}
	if err := f.start(func(func(int)) error { return boom }, emit); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); f.failed() == nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the failing worker's error never arrived")
		}
	}
	if err := f.start(producing, emit); !errors.Is(err, boom) {
		t.Fatalf("start after a worker failed: %v, want %v", err, boom)
	}
	done := make(chan struct{})
	go func() { f.working.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a worker is still blocked on the output of an abandoned bundle")
	}
	if err := f.drain(emit); !errors.Is(err, boom) {
		t.Fatalf("drain of the failed bundle: %v", err)
	}
	emitted = 0
	if err := f.start(producing, emit); err != nil {
		t.Fatalf("the next bundle: %v", err)
	}
	if err := f.drain(emit); err != nil || emitted != 10*cap(f.out) {
		t.Fatalf("the next bundle emitted %d of %d (%v)", emitted, 10*cap(f.out), err)
	}
}

package beam

import (
	"runtime"
	"sync"
)

// fanIn runs a DoFn's work items (the parts of a file or a table, one an element) in goroutines, as
// many at once as GOMAXPROCS, and hands what they produce to the DoFn's own goroutine, which alone may
// emit: Prism hands a stage all of its input as one bundle, so parts processed in ProcessElement were
// read one after another and a second core sat idle. What a worker produces is emitted as it comes,
// never held for the bundle's end. The first error a worker returns is returned by the next start or
// by drain, and fails the bundle; it also stops the other workers' sends (what they produce is dropped,
// the bundle having failed), so a bundle abandoned at its error leaves no goroutine blocked on out.
type fanIn[T any] struct {
	slots   chan struct{} // one for each item being worked on
	out     chan T
	working sync.WaitGroup
	mu      sync.Mutex
	err     error
	stop    chan struct{} // closed at the first error
}

func (f *fanIn[T]) setup() {
	f.slots = make(chan struct{}, runtime.GOMAXPROCS(0))
	f.out = make(chan T, 1024)
	f.stop = make(chan struct{})
}

// send hands v to the DoFn's goroutine, or drops it once a worker has failed.
func (f *fanIn[T]) send(v T) {
	select {
	case f.out <- v:
	case <-f.stop:
	}
}

// start runs work in a goroutine once a slot is free, emitting meanwhile what the others produce.
func (f *fanIn[T]) start(work func(send func(T)) error, emit func(T)) error {
	for {
		if err := f.failed(); err != nil {
			return err
		}
		select {
		case f.slots <- struct{}{}:
			f.working.Add(1)
			go func() {
				defer func() { <-f.slots; f.working.Done() }()
				if err := work(f.send); err != nil {
					f.mu.Lock()
					if f.err == nil {
						f.err = err
						close(f.stop)
					}
					f.mu.Unlock()
				}
			}()
			return nil
		case v := <-f.out:
			emit(v)
		}
	}
}

// drain emits what the running work produces until all of it has ended (a bundle's end).
func (f *fanIn[T]) drain(emit func(T)) error {
	done := make(chan struct{})
	go func() { f.working.Wait(); close(done) }()
	for {
		select {
		case v := <-f.out:
			emit(v)
		case <-done:
			for {
				select {
				case v := <-f.out:
					emit(v)
				default:
					f.mu.Lock()
					defer f.mu.Unlock()
					err := f.err
					if err != nil { // the next bundle starts afresh (every worker has ended)
						f.err, f.stop = nil, make(chan struct{})
					}
					return err
				}
			}
		}
	}
}

func (f *fanIn[T]) failed() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

package breached

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hungDisk stands in for a mount that hangs: a range file opens, and its
// first read blocks, whatever the context, until release is closed.
type hungDisk struct {
	release chan struct{}
	opened  atomic.Int32 // files opened
	reading atomic.Int32 // reads blocked now
}

func (h *hungDisk) open(string) (io.ReadCloser, error) {
	h.opened.Add(1)
	return hungFile{h}, nil
}

type hungFile struct{ h *hungDisk }

func (f hungFile) Read([]byte) (int, error) {
	f.h.reading.Add(1)
	defer f.h.reading.Add(-1)
	<-f.h.release
	return 0, io.EOF
}

func (hungFile) Close() error { return nil }

// TestHungReadsAreBounded: on a disk whose reads never end, lookups still
// end at their bound, and no more than maxReads reads are ever left
// behind however many lookups come; once the disk answers, they end and
// lookups work again.
func TestHungReadsAreBounded(t *testing.T) {
	path := t.TempDir()
	if err := os.WriteFile(filepath.Join(path, "00000.txt"), fmt.Appendf(nil, "%035X:1\n", 0), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := newDir(path)
	if err != nil {
		t.Fatal(err)
	}
	disk := &hungDisk{release: make(chan struct{})}
	d.open = disk.open
	released := false
	release := func() {
		if !released {
			close(disk.release)
			released = true
		}
	}
	t.Cleanup(release)

	const lookups = 4 * maxReads
	var wg sync.WaitGroup
	for range lookups {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			defer cancel()
			start := time.Now()
			if got, err := d.Breached(ctx, "password1"); got || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Breached on a hung disk = %v, %v; want false, context.DeadlineExceeded", got, err)
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("a lookup took %v, past its bound of 100ms", took)
			}
		})
	}
	wg.Wait()
	if n := disk.opened.Load(); n > maxReads {
		t.Errorf("%d range files opened by %d lookups on a hung disk, want at most %d", n, lookups, maxReads)
	}
	if n := disk.reading.Load(); n > maxReads {
		t.Errorf("%d reads left behind, want at most %d", n, maxReads)
	}

	release()
	// The reads end once the disk answers, however late a loaded machine
	// runs them; one left blocked never does.
	deadline := time.Now().Add(10 * time.Second)
	for (disk.reading.Load() > 0 || len(d.slots) > 0) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n, held := disk.reading.Load(), len(d.slots); n > 0 || held > 0 {
		t.Fatalf("after the disk answered: %d reads still blocked, %d slots held", n, held)
	}
	d.open = openRange
	if _, err := d.Breached(t.Context(), "password1"); err != nil {
		t.Errorf("Breached once the disk answers: %v", err)
	}
}

// Command build benchmarks the job image builder (internal/build) against a real registry
// (CNCF Distribution on loopback, started here, or -registry):
//
//   - append: build and push of a job of -size bytes without requirements, next to
//     `crane append` (go-containerregistry's cmd/crane, built from the module's Go tool)
//     of the same files as a tarball onto the same base, alternating, -runs times each;
//     every run has distinct content, so every run uploads its layer;
//   - rebuild: the same job built again: bytes pushed and registry write requests;
//   - many: -jobs jobs with distinct sources built by -workers workers, as the
//     synchronizer's build stage does: total time and the process's peak memory.
//
// docs/benchmarks.md has the command and the results.
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/datajobs/datajobs/bench/internal/stats"
	"github.com/datajobs/datajobs/internal/build"
	"github.com/datajobs/datajobs/internal/build/buildtest"
	"github.com/datajobs/datajobs/internal/devenv"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/build:", err)
		os.Exit(1)
	}
}

func run() error {
	registry := flag.String("registry", "", "registry host:port (default: start one)")
	size := flag.Int("size", 1<<20, "bytes of job files in the append benchmark")
	runs := flag.Int("runs", 15, "runs of each side of the append benchmark")
	jobs := flag.Int("jobs", 100, "jobs of the many benchmark")
	workers := flag.Int("workers", 2, "build workers of the many benchmark")
	flag.Parse()
	ctx := context.Background()

	tmp, err := os.MkdirTemp("", "datajobs-bench-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	root, err := devenv.RepoRoot()
	if err != nil {
		return err
	}
	if *registry == "" {
		bin, err := devenv.EnsureRegistryBinary(ctx, root, os.Stderr)
		if err != nil {
			return err
		}
		reg, err := devenv.StartRegistry(ctx, devenv.RegistryConfig{Bin: bin, Dir: filepath.Join(tmp, "registry"), LogPath: filepath.Join(tmp, "registry.log")})
		if err != nil {
			return err
		}
		defer reg.Stop() //nolint:errcheck // the benchmark is over
		*registry = reg.Addr
	}
	crane := filepath.Join(tmp, "crane")
	gobuild := exec.Command("go", "build", "-o", crane, "github.com/google/go-containerregistry/cmd/crane")
	gobuild.Dir, gobuild.Stderr = root, os.Stderr
	if err := gobuild.Run(); err != nil {
		return fmt.Errorf("build crane: %w", err)
	}
	base, err := build.PushDevBase(ctx, *registry+"/bench/python-base:dev")
	if err != nil {
		return err
	}
	var writes, requests atomic.Int64
	transport := roundTripper(func(r *http.Request) (*http.Response, error) {
		requests.Add(1)
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writes.Add(1)
		}
		return remote.DefaultTransport.RoundTrip(r)
	})
	b, err := build.NewLayerBuilder(build.Config{
		Registry: *registry + "/bench", Insecure: true, BaseImages: map[string]string{"3.11": base},
		Transport: transport, TempDir: tmp,
	})
	if err != nil {
		return err
	}
	fmt.Printf("registry %s, base %s, %s\n\n", *registry, base, goVersion())

	// append
	var ours, theirs []time.Duration
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range *runs {
		files := jobFiles(rng, *size)
		src, err := buildtest.Zip("append-job", files)
		if err != nil {
			return err
		}
		req := build.Request{Job: "append-job", Version: fmt.Sprint(i), PythonVersion: "3.11", Sources: src}
		start := time.Now()
		if _, err := b.Build(ctx, req); err != nil {
			return err
		}
		ours = append(ours, time.Since(start))

		tarball := filepath.Join(tmp, "layer.tar")
		if err := writeTar(tarball, files); err != nil {
			return err
		}
		start = time.Now()
		cmd := exec.Command(crane, "append", "--insecure", "--base", base, "--new_layer", tarball,
			"--new_tag", fmt.Sprintf("%s/bench/crane-job:%d", *registry, i))
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("crane append: %w: %s", err, out)
		}
		theirs = append(theirs, time.Since(start))
	}
	mo, mt := stats.Percentile(ours, 50), stats.Percentile(theirs, 50)
	fmt.Printf("append (%d bytes of job files, %d runs each, alternating)\n", *size, *runs)
	fmt.Printf("  datajobs build+push  p50 %v  min %v  max %v\n", mo.Round(time.Millisecond), slices.Min(ours).Round(time.Millisecond), slices.Max(ours).Round(time.Millisecond))
	fmt.Printf("  crane append         p50 %v  min %v  max %v\n", mt.Round(time.Millisecond), slices.Min(theirs).Round(time.Millisecond), slices.Max(theirs).Round(time.Millisecond))
	fmt.Printf("  ratio p50 %.2fx\n\n", float64(mo)/float64(mt))

	// rebuild
	files := jobFiles(rng, *size)
	src, err := buildtest.Zip("rebuild-job", files)
	if err != nil {
		return err
	}
	req := build.Request{Job: "rebuild-job", Version: "1", PythonVersion: "3.11", Sources: src}
	first, err := b.Build(ctx, req)
	if err != nil {
		return err
	}
	writes.Store(0)
	requests.Store(0)
	again, err := b.Build(ctx, req)
	if err != nil {
		return err
	}
	fmt.Printf("rebuild of the same job: same digest %v, bytes pushed %d (first build %d), registry requests %d of which writes %d\n",
		first.Digest == again.Digest, again.BytesPushed, first.BytesPushed, requests.Load(), writes.Load())
	fmt.Printf("  (the synchronizer never gets here for a built version: it reads the digest from PostgreSQL and makes no request at all)\n\n")

	// many
	rssBefore := peakRSS()
	queue := make(chan int)
	var wg sync.WaitGroup
	var failed atomic.Int64
	start := time.Now()
	for range *workers {
		wg.Go(func() {
			for i := range queue {
				r := rand.New(rand.NewPCG(uint64(i), 7))
				name := fmt.Sprintf("many-%03d", i)
				src, err := buildtest.Zip(name, jobFiles(r, 64<<10))
				if err == nil {
					_, err = b.Build(ctx, build.Request{Job: name, Version: "1", PythonVersion: "3.11", Sources: src})
				}
				if err != nil {
					failed.Add(1)
					fmt.Fprintln(os.Stderr, err)
				}
			}
		})
	}
	for i := range *jobs {
		queue <- i
	}
	close(queue)
	wg.Wait()
	took := time.Since(start)
	fmt.Printf("many: %d jobs (64 KiB of files each), %d workers: %v total, %.1f builds/s, %d failed; peak RSS of the process %d MiB (before: %d MiB)\n",
		*jobs, *workers, took.Round(time.Millisecond), float64(*jobs)/took.Seconds(), failed.Load(), peakRSS()>>20, rssBefore>>20)
	return nil
}

// jobFiles is a job of about size bytes: a config, a step and incompressible data.
func jobFiles(rng *rand.Rand, size int) map[string]string {
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	return map[string]string{"config.ini": "[owner]\nteam = bench\n", "10_step.py": "def run(job_input):\n    pass\n", "data.bin": string(data)}
}

// writeTar writes the files under job/ as a plain tar, the input of crane append.
func writeTar(path string, files map[string]string) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := tw.WriteHeader(&tar.Header{Name: "job/" + name, Mode: 0o644, Size: int64(len(files[name])), Uid: 1000, Gid: 1000, ModTime: build.Epoch}); err != nil {
			return err
		}
		if _, err := tw.Write([]byte(files[name])); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// peakRSS is the process's peak resident set size in bytes.
func peakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss << 10
}

func goVersion() string {
	out, err := exec.Command("go", "version").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

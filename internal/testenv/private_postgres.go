package testenv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresServer is a Postgres server that belongs to one test, so that the
// test may crash and restart it (failure tests) without touching the server
// other tests share. It keeps its data across restarts, like a real server.
type PostgresServer struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	cred *syscall.Credential // the postgres system user, when run as root

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// PrivatePostgres initialises and starts a Postgres server for this test,
// with a database named xcloak; it is stopped and removed when the test
// ends. Postgres will not run as root: as root, the server runs as the
// postgres system user that Debian's package creates.
func PrivatePostgres(t testing.TB) *PostgresServer {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Strings(bins)
	if len(bins) == 0 {
		t.Fatal("testenv: no /usr/lib/postgresql/*/bin: install the Debian package postgresql")
	}
	s := &PostgresServer{t: t, bin: bins[len(bins)-1]}
	dir, err := os.MkdirTemp("", "xcloak-pg-")
	if err != nil {
		t.Fatal(err)
	}
	s.dir = dir
	t.Cleanup(func() { s.Stop(); _ = os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("testenv: running as root needs the postgres system user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data")
	initdb := s.command("initdb", "-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8")
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("testenv: initdb: %v\n%s", err, out)
	}
	for tries := 0; s.port == 0; tries++ {
		if tries > 100 {
			t.Fatal("testenv: no free port for a private Postgres")
		}
		if p := portLow + rand.IntN(portHigh-portLow); portFree(p) {
			s.port = p
		}
	}
	s.Start()
	conn, err := pgx.Connect(context.Background(), s.adminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "CREATE DATABASE xcloak"); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *PostgresServer) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = dieWithParent()
	if s.cred != nil {
		cmd.SysProcAttr.Credential = s.cred
	}
	return cmd
}

// URL returns the URL of the server's xcloak database.
func (s *PostgresServer) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/xcloak?sslmode=disable", s.port)
}

func (s *PostgresServer) adminURL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// Start starts the server if it is stopped and waits until it accepts
// connections (after crash recovery, if it crashed).
func (s *PostgresServer) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
	}
	logPath := filepath.Join(s.dir, "postgres.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	defer logFile.Close()
	cmd := s.command("postgres", "-D", filepath.Join(s.dir, "data"), "-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+s.dir, "-c", "fsync=off")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("testenv: starting private Postgres: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.adminURL())
		cancel()
		if err == nil {
			conn.Close(context.Background())
			s.cmd, s.done = cmd, done
			return
		}
		select {
		case <-done:
			log, _ := os.ReadFile(logPath)
			s.t.Fatalf("testenv: private Postgres exited: %v\n%s", err, log)
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			s.t.Fatalf("testenv: private Postgres did not accept connections: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop crashes the server: SIGQUIT, Postgres' immediate shutdown, which
// drops every connection and skips the checkpoint, so that the next start
// runs crash recovery.
func (s *PostgresServer) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd, s.done = nil, nil
}

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestServicesPrivateDir: run as root where the postgres user cannot
// reach the repository, scripts/services.sh keeps Postgres' data under a
// name in /tmp known in advance. A directory another user made there, or
// a link, must stop it: root would otherwise put the server's data in it
// and hand its log (a link to any file) to the postgres user. Skipped
// where the test cannot give a directory to another user.
func TestServicesPrivateDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root can make a directory of another user's")
	}
	script, err := filepath.Abs(filepath.Join(repoRoot, "scripts", "services.sh"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	privateDir := func(path string) error {
		cmd := exec.Command("bash", "-c", `source "$1" && private_dir "$2"`, "bash", script, path)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Logf("private_dir %s: %s", path, out)
		}
		return err
	}

	theirs := filepath.Join(dir, "theirs")
	if err := os.Mkdir(theirs, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Skip("cannot give a directory to another user:", err)
	}
	if privateDir(theirs) == nil {
		t.Error("another user's directory was taken")
	}
	link := filepath.Join(dir, "link")
	ours := filepath.Join(dir, "ours")
	if err := os.Mkdir(ours, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(ours, link); err != nil {
		t.Fatal(err)
	}
	if privateDir(link) == nil {
		t.Error("a link was taken for a directory")
	}

	// A server's files planted under the name stop_postgres also looks
	// at are not its to stop: it would run pg_ctl on them, which signals
	// the process their postmaster.pid names.
	planted := filepath.Join(theirs, "postgres")
	if err := os.Mkdir(planted, 0o777); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"PG_VERSION": "999\n", "postmaster.pid": "1\n"} {
		if err := os.WriteFile(filepath.Join(planted, name), []byte(content), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	// as_pg answers that no server runs, so that a real one of the
	// checkout's own (.data/postgres) is never stopped by the test.
	stop := exec.Command("bash", "-c", `source "$1" && planted=$2 && fallback_pg_data() { printf %s "$planted"; } && as_pg() { return 3; } && stop_postgres`,
		"bash", script, planted)
	if out, err := stop.CombinedOutput(); err != nil || !strings.Contains(string(out), "nothing to stop") {
		t.Errorf("stop_postgres with another user's server files under the fallback name: %v\n%s", err, out)
	}

	fresh := filepath.Join(dir, "fresh")
	if err := privateDir(fresh); err != nil {
		t.Fatalf("a new directory: %v", err)
	}
	if err := privateDir(fresh); err != nil {
		t.Errorf("its own directory, again: %v", err)
	}
	if fi, err := os.Lstat(fresh); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o755 {
		t.Errorf("the new directory: %v, %v; want a directory of mode 0755", fi, err)
	}
}

// TestServicesRedact: scripts/services.sh quotes XCLOAK_REDIS_URL and
// XCLOAK_DATABASE_URL in its messages with the password masked, the
// keyword/value form of a database URL (password=...), which serve
// takes too, included.
func TestServicesRedact(t *testing.T) {
	script, err := filepath.Abs(filepath.Join(repoRoot, "scripts", "services.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{
		"postgres://xcloak:hunter2@db.example.com:5432/xcloak",
		"redis://:hunter2@cache.example.com:6379/0",
		"host=db.example.com user=xcloak password=hunter2 dbname=xcloak",
		"host=db.example.com password='hunter2 x' dbname=xcloak",
		"user=xcloak password = hunter2",
	} {
		out, err := exec.Command("bash", "-c", `source "$1" && redact "$2"`, "bash", script, raw).CombinedOutput()
		if err != nil {
			t.Errorf("redact %s: %v\n%s", raw, err, out)
			continue
		}
		if strings.Contains(string(out), "hunter2") {
			t.Errorf("redact %s = %s, showing the password", raw, out)
		}
	}
}

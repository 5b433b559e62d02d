package main

import (
	"bufio"
	"context"
	"debug/elf"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// repoRoot is the module root, where the Dockerfile and docker-compose.yml
// live, seen from this package's directory, where tests run.
const repoRoot = "../.."

// loadCompose loads docker-compose.yml as docker compose would, with env as
// the whole environment it interpolates from.
func loadCompose(t *testing.T, env map[string]string) (*types.Project, error) {
	t.Helper()
	dir, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	details := types.ConfigDetails{
		WorkingDir:  dir,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(dir, "docker-compose.yml")}},
		Environment: types.Mapping(env),
	}
	return loader.LoadWithContext(context.Background(), details, func(o *loader.Options) {
		o.SetProjectName("xcloak", true)
	})
}

// mustLoadCompose loads docker-compose.yml with XCLOAK_SECRET set and fails
// the test if it does not load.
func mustLoadCompose(t *testing.T, env map[string]string) *types.Project {
	t.Helper()
	all := map[string]string{"XCLOAK_SECRET": testSecret, "POSTGRES_PASSWORD": "0123456789abcdef"}
	for k, v := range env {
		all[k] = v
	}
	p, err := loadCompose(t, all)
	if err != nil {
		t.Fatalf("load docker-compose.yml: %v", err)
	}
	return p
}

func mustService(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, ok := p.Services[name]
	if !ok {
		t.Fatalf("docker-compose.yml has no service %q; it has %v", name, slices.Sorted(maps.Keys(p.Services)))
	}
	return s
}

// serviceEnv is a service's environment as the container sees it, without
// the variables compose leaves unset.
func serviceEnv(s types.ServiceConfig) map[string]string {
	env := make(map[string]string)
	for k, v := range s.Environment {
		if v != nil {
			env[k] = *v
		}
	}
	return env
}

func TestComposeServices(t *testing.T) {
	p := mustLoadCompose(t, nil)
	xcloak := mustService(t, p, "xcloak")

	for _, name := range []string{"postgres", "redis"} {
		t.Run(name+" is healthy before xcloak starts", func(t *testing.T) {
			s := mustService(t, p, name)
			hc := s.HealthCheck
			if hc == nil || hc.Disable || len(hc.Test) == 0 {
				t.Fatalf("%s healthcheck = %+v, want a test command", name, hc)
			}
			dep, ok := xcloak.DependsOn[name]
			if !ok {
				t.Fatalf("xcloak depends_on = %v, want %s", slices.Sorted(maps.Keys(xcloak.DependsOn)), name)
			}
			if got, want := dep.Condition, types.ServiceConditionHealthy; got != want {
				t.Errorf("xcloak depends_on %s condition = %q, want %q", name, got, want)
			}
		})
	}

	t.Run("postgres keeps its data in the pgdata volume", func(t *testing.T) {
		if _, ok := p.Volumes["pgdata"]; !ok {
			t.Fatalf("top-level volumes = %v, want pgdata", slices.Sorted(maps.Keys(p.Volumes)))
		}
		pg := mustService(t, p, "postgres")
		mounted := slices.ContainsFunc(pg.Volumes, func(v types.ServiceVolumeConfig) bool {
			return v.Type == types.VolumeTypeVolume && v.Source == "pgdata" && v.Target == "/var/lib/postgresql/data"
		})
		if !mounted {
			t.Errorf("postgres volumes = %+v, want pgdata at /var/lib/postgresql/data", pg.Volumes)
		}
	})

	t.Run("xcloak is built from the Dockerfile and serves", func(t *testing.T) {
		if xcloak.Build == nil || xcloak.Build.Context != p.WorkingDir {
			t.Errorf("xcloak build = %+v, want the repository's Dockerfile", xcloak.Build)
		}
		// No command means the image's CMD, serve; --dev must never be used
		// on a published port.
		if len(xcloak.Command) > 0 {
			t.Errorf("xcloak command = %q, want the image's default (serve)", xcloak.Command)
		}
	})

	t.Run("xcloak is given time to shut down gracefully", func(t *testing.T) {
		if xcloak.StopGracePeriod == nil {
			t.Fatalf("xcloak stop_grace_period unset; the default 10s does not leave room for a %s shutdown", shutdownTimeout)
		}
		if got := time.Duration(*xcloak.StopGracePeriod); got <= shutdownTimeout {
			t.Errorf("xcloak stop_grace_period = %s, want more than the %s requests get to finish", got, shutdownTimeout)
		}
		if got, want := xcloak.Restart, types.RestartPolicyUnlessStopped; got != want {
			t.Errorf("xcloak restart = %q, want %q", got, want)
		}
	})

	t.Run("the published port reaches the port the image listens on", func(t *testing.T) {
		d := mustReadDockerfile(t)
		_, port, err := net.SplitHostPort(d.final.env["XCLOAK_ADDR"])
		if err != nil {
			t.Fatalf("Dockerfile XCLOAK_ADDR: %v", err)
		}
		if len(xcloak.Ports) != 1 {
			t.Fatalf("xcloak ports = %+v, want one", xcloak.Ports)
		}
		if got := fmt.Sprint(xcloak.Ports[0].Target); got != port {
			t.Errorf("xcloak port target = %s, want %s, where XCLOAK_ADDR listens in the image", got, port)
		}
		if !slices.Contains(d.final.expose, port) {
			t.Errorf("Dockerfile EXPOSE = %v, want %s", d.final.expose, port)
		}
	})

	t.Run("only xcloak is published, and on loopback alone", func(t *testing.T) {
		// The compose file serves plain http, with cookies that go without
		// Secure: published on every interface, which Docker opens past
		// the host's firewall, passwords would cross the network in clear.
		// A proxy on the same host reaches loopback.
		for name, s := range p.Services {
			for _, port := range s.Ports {
				if name != "xcloak" {
					t.Errorf("%s publishes port %d to the host, want none", name, port.Target)
				} else if ip := net.ParseIP(port.HostIP); ip == nil || !ip.IsLoopback() {
					t.Errorf("xcloak publishes port %d on host address %q, want a loopback one", port.Target, port.HostIP)
				}
			}
		}
	})

	t.Run("postgres is checked over TCP, not the socket the init-time server answers on", func(t *testing.T) {
		hc := mustService(t, p, "postgres").HealthCheck
		if hc == nil || len(hc.Test) < 2 || hc.Test[0] != "CMD" || hc.Test[1] != "pg_isready" {
			t.Fatalf("postgres healthcheck = %+v, want [CMD pg_isready ...]", hc)
		}
		host := ""
		for i, arg := range hc.Test {
			if v, ok := strings.CutPrefix(arg, "--host="); ok {
				host = v
			} else if (arg == "-h" || arg == "--host") && i+1 < len(hc.Test) {
				host = hc.Test[i+1]
			}
		}
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			t.Errorf("pg_isready host = %q, want a loopback address: without one it asks the Unix socket", host)
		}
	})

	t.Run("redis keeps an append-only file in a volume", func(t *testing.T) {
		r := mustService(t, p, "redis")
		cmd := strings.Join(r.Command, " ")
		if !strings.Contains(cmd, "--appendonly yes") {
			t.Errorf("redis command = %q, want --appendonly yes", r.Command)
		}
		mounted := slices.ContainsFunc(r.Volumes, func(v types.ServiceVolumeConfig) bool {
			_, declared := p.Volumes[v.Source]
			return v.Type == types.VolumeTypeVolume && declared && v.Target == "/data"
		})
		if !mounted {
			t.Errorf("redis volumes = %+v, want a named volume at /data, where the append-only file is written", r.Volumes)
		}
	})

	t.Run("xcloak's health check is xcloak healthcheck at the address it serves", func(t *testing.T) {
		hc := xcloak.HealthCheck
		if hc == nil || hc.Disable {
			t.Fatalf("xcloak healthcheck = %+v, want one", hc)
		}
		d := mustReadDockerfile(t)
		entry, err := execForm(d.final.entrypoint)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"CMD", entry[0], "healthcheck"}; !slices.Equal(hc.Test, want) {
			t.Errorf("xcloak healthcheck test = %q, want %q", hc.Test, want)
		}
		if hc.Timeout == nil || time.Duration(*hc.Timeout) <= healthcheckTimeout {
			t.Errorf("xcloak healthcheck timeout = %v, want more than the %s the command allows itself", hc.Timeout, healthcheckTimeout)
		}
		addr := d.final.env["XCLOAK_ADDR"]
		if v := serviceEnv(xcloak)["XCLOAK_ADDR"]; v != "" {
			addr = v
		}
		url, err := readyzURL(addr)
		if err != nil {
			t.Fatalf("xcloak healthcheck cannot check XCLOAK_ADDR %q: %v", addr, err)
		}
		_, port, _ := net.SplitHostPort(addr)
		if len(xcloak.Ports) == 0 || fmt.Sprint(xcloak.Ports[0].Target) != port {
			t.Errorf("xcloak healthcheck asks %s, not the port the service publishes (%+v)", url, xcloak.Ports)
		}
	})
}

func TestComposeXCloakEnvironment(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string // besides XCLOAK_SECRET
	}{
		{"defaults", nil},
		{"operator's values", map[string]string{
			"POSTGRES_PASSWORD":       "c0ffee",
			"XCLOAK_PUBLIC_URL":       "https://login.example.com",
			"XCLOAK_INSECURE_COOKIES": "false",
			"XCLOAK_SMTP_URL":         "smtp://xcloak:pw@mail.example.com:587?from=xcloak@example.com",
			"XCLOAK_TRUSTED_PROXIES":  "10.0.0.0/8, 192.168.1.7",
			"XCLOAK_MAIL_LOG":         "true",
		}},
	}
	known := make(map[string]bool)
	for _, s := range settings {
		known[s.env] = true
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustLoadCompose(t, tt.env)
			xcloak := mustService(t, p, "xcloak")
			pg := mustService(t, p, "postgres")

			xEnv := serviceEnv(xcloak)
			for k := range xEnv {
				if strings.HasPrefix(k, "XCLOAK_") && !known[k] {
					t.Errorf("xcloak environment sets %s, which is no setting of xcloak serve", k)
				}
			}
			for k, v := range tt.env {
				if strings.HasPrefix(k, "XCLOAK_") && xEnv[k] != v {
					t.Errorf("xcloak %s = %q, want %q from the environment", k, xEnv[k], v)
				}
			}

			// The container's environment is the image's with the
			// service's on top; serve checks every value as it starts.
			image := mustReadDockerfile(t).final.env
			getenv := func(k string) string {
				if v, ok := xEnv[k]; ok {
					return v
				}
				return image[k]
			}
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			cfg, err := loadConfig(fs, nil, getenv, io.Discard, io.Discard, forServe)
			if err != nil {
				t.Fatalf("xcloak serve rejects the compose environment: %v", err)
			}
			if string(cfg.Auth.Secret) != testSecret {
				t.Errorf("xcloak secret is not XCLOAK_SECRET from the environment")
			}

			opts, err := redis.ParseURL(cfg.RedisURL)
			if err != nil {
				t.Fatalf("XCLOAK_REDIS_URL: %v", err)
			}
			if host, _, _ := net.SplitHostPort(opts.Addr); host != "redis" {
				t.Errorf("XCLOAK_REDIS_URL host = %q, want the redis service", host)
			}

			db, err := pgx.ParseConfig(cfg.DatabaseURL)
			if err != nil {
				t.Fatalf("XCLOAK_DATABASE_URL: %v", err)
			}
			pgEnv := serviceEnv(pg)
			if db.Host != "postgres" {
				t.Errorf("XCLOAK_DATABASE_URL host = %q, want the postgres service", db.Host)
			}
			if db.Database != pgEnv["POSTGRES_DB"] {
				t.Errorf("XCLOAK_DATABASE_URL database = %q, want POSTGRES_DB %q", db.Database, pgEnv["POSTGRES_DB"])
			}
			if db.Password == "" || db.Password != pgEnv["POSTGRES_PASSWORD"] {
				t.Errorf("XCLOAK_DATABASE_URL password differs from the postgres service's POSTGRES_PASSWORD")
			}
			if want, ok := tt.env["POSTGRES_PASSWORD"]; ok && db.Password != want {
				t.Errorf("XCLOAK_DATABASE_URL password is not POSTGRES_PASSWORD from the environment")
			}

			// Metrics listen where a Prometheus on the compose network
			// reaches them, on a port not published to the host.
			if host, port, err := net.SplitHostPort(cfg.MetricsAddr); err != nil || !net.ParseIP(host).IsUnspecified() {
				t.Errorf("XCLOAK_METRICS_ADDR = %q, want a port on every interface of the container", cfg.MetricsAddr)
			} else {
				for _, published := range xcloak.Ports {
					if fmt.Sprint(published.Target) == port {
						t.Errorf("metrics port %s is published to the host as %s", port, published.Published)
					}
				}
			}

			if _, set := tt.env["XCLOAK_PUBLIC_URL"]; !set && len(xcloak.Ports) > 0 {
				if got, want := cfg.Auth.PublicURL.Port(), xcloak.Ports[0].Published; got != want {
					t.Errorf("default XCLOAK_PUBLIC_URL port = %s, want the published port %s", got, want)
				}
			}
		})
	}
}

// TestComposeVariablesDocumented: every variable docker-compose.yml
// takes from the operator's environment or .env is a row of the table in
// docs/DEPLOY.md that lists them, so that none is set (or left unset)
// without the operator knowing the compose file reads it.
func TestComposeVariablesDocumented(t *testing.T) {
	compose, err := os.ReadFile(filepath.Join(repoRoot, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "DEPLOY.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "Compose passes these variables through:\n\n")
	table, _, _ = strings.Cut(table, "\n\n")
	if !ok {
		t.Fatal("docs/DEPLOY.md has no table of the variables compose passes through")
	}
	for _, m := range regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)`).FindAllStringSubmatch(string(compose), -1) {
		if !strings.Contains(table, "| `"+m[1]+"` |") {
			t.Errorf("docker-compose.yml reads %s, which docs/DEPLOY.md's table of its variables does not list", m[1])
		}
	}
}

func TestComposeRequiresSecret(t *testing.T) {
	const want = "set XCLOAK_SECRET to 32+ random bytes"
	tests := []struct {
		name string
		env  map[string]string
	}{
		{"unset", map[string]string{"POSTGRES_PASSWORD": "0123456789abcdef"}},
		{"empty", map[string]string{"XCLOAK_SECRET": "", "POSTGRES_PASSWORD": "0123456789abcdef"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadCompose(t, tt.env)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("load without XCLOAK_SECRET: error %v, want one saying %q", err, want)
			}
		})
	}
}

// TestComposeRequiresDatabasePassword: no password of the compose file's
// own for Postgres, which every container added to its network (a
// Prometheus, a proxy) would reach as its superuser.
func TestComposeRequiresDatabasePassword(t *testing.T) {
	const want = "set POSTGRES_PASSWORD to a random hex string"
	for name, env := range map[string]map[string]string{
		"unset": {"XCLOAK_SECRET": testSecret},
		"empty": {"XCLOAK_SECRET": testSecret, "POSTGRES_PASSWORD": ""},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadCompose(t, env)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("load without POSTGRES_PASSWORD: error %v, want one saying %q", err, want)
			}
		})
	}
}

// stage is one FROM stage of a Dockerfile, with the instructions the tests
// look at.
type stage struct {
	name       string
	from       string
	user       string
	env        map[string]string
	expose     []string
	entrypoint string // as written
	cmd        string
	runs       []string
	copies     []string // the arguments of each COPY
	args       []string // the names each ARG declares
}

type dockerfile struct {
	stages []*stage
	final  *stage
}

// readDockerfile reads the instructions of a Dockerfile: continuation lines
// joined, comments dropped, each instruction filed under its stage.
func readDockerfile(path string) (dockerfile, error) {
	f, err := os.Open(path)
	if err != nil {
		return dockerfile{}, err
	}
	defer f.Close()

	var d dockerfile
	var cur *stage
	var pending strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if pending.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if rest, ok := strings.CutSuffix(line, `\`); ok {
			pending.WriteString(rest + " ")
			continue
		}
		pending.WriteString(line)
		instr := pending.String()
		pending.Reset()

		keyword, args, _ := strings.Cut(instr, " ")
		keyword, args = strings.ToUpper(keyword), strings.TrimSpace(args)
		if keyword == "FROM" {
			fields := strings.Fields(args)
			cur = &stage{from: fields[0], env: map[string]string{}}
			if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
				cur.name = fields[2]
			}
			d.stages = append(d.stages, cur)
			continue
		}
		if cur == nil {
			return dockerfile{}, fmt.Errorf("%s before the first FROM", keyword)
		}
		switch keyword {
		case "USER":
			cur.user = args
		case "ENV":
			k, v, ok := strings.Cut(args, "=")
			if !ok {
				return dockerfile{}, fmt.Errorf("ENV %s: want KEY=value", args)
			}
			cur.env[k] = v
		case "EXPOSE":
			cur.expose = append(cur.expose, strings.Fields(args)...)
		case "ENTRYPOINT":
			cur.entrypoint = args
		case "CMD":
			cur.cmd = args
		case "RUN":
			cur.runs = append(cur.runs, args)
		case "COPY":
			cur.copies = append(cur.copies, args)
		case "ARG":
			name, _, _ := strings.Cut(args, "=")
			cur.args = append(cur.args, name)
		}
	}
	if err := sc.Err(); err != nil {
		return dockerfile{}, err
	}
	if len(d.stages) == 0 {
		return dockerfile{}, fmt.Errorf("no FROM")
	}
	d.final = d.stages[len(d.stages)-1]
	return d, nil
}

func mustReadDockerfile(t *testing.T) dockerfile {
	t.Helper()
	d, err := readDockerfile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	return d
}

func (d dockerfile) stage(name string) *stage {
	for _, s := range d.stages {
		if s.name == name {
			return s
		}
	}
	return nil
}

// execForm parses the JSON form of ENTRYPOINT or CMD, the only form that
// runs in an image without a shell.
func execForm(args string) ([]string, error) {
	var argv []string
	if err := json.Unmarshal([]byte(args), &argv); err != nil || len(argv) == 0 {
		return nil, fmt.Errorf("%s is not the exec form [\"program\", ...]; the final image has no shell", args)
	}
	return argv, nil
}

// goBuild is the go build a RUN instruction runs: the variables set before
// it, its arguments, and the output path.
type goBuild struct {
	env    []string
	args   []string // after "go build"
	output string
}

// findGoBuild finds the RUN of s that runs go build and splits it into
// words as a shell would (the RUN holds no expansions).
func findGoBuild(s *stage) (goBuild, error) {
	for _, run := range s.runs {
		words, err := shellWords(run)
		if err != nil {
			return goBuild{}, fmt.Errorf("RUN %s: %w", run, err)
		}
		var b goBuild
		i := 0
		for ; i < len(words) && strings.HasPrefix(words[i], "--"); i++ { // RUN --mount=...
		}
		for ; i < len(words) && strings.Contains(words[i], "=") && !strings.HasPrefix(words[i], "-"); i++ {
			b.env = append(b.env, words[i])
		}
		if len(words) < i+2 || words[i] != "go" || words[i+1] != "build" {
			continue
		}
		b.args = words[i+2:]
		if o := slices.Index(b.args, "-o"); o >= 0 && o+1 < len(b.args) {
			b.output = b.args[o+1]
		}
		return b, nil
	}
	return goBuild{}, fmt.Errorf("no RUN with go build in stage %q", s.name)
}

// shellWords splits s at blanks, honouring double and single quotes.
func shellWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				w.WriteRune(r)
			}
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unclosed %c", quote)
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

func TestDockerfileFinalStage(t *testing.T) {
	d := mustReadDockerfile(t)
	final := d.final

	t.Run("runs as a user other than root", func(t *testing.T) {
		user, _, _ := strings.Cut(final.user, ":")
		if user == "" || user == "root" || user == "0" {
			t.Errorf("final stage USER = %q, want a user other than root", final.user)
		}
	})

	t.Run("starts the binary built in the build stage", func(t *testing.T) {
		entry, err := execForm(final.entrypoint)
		if err != nil {
			t.Fatalf("ENTRYPOINT: %v", err)
		}
		cmd, err := execForm(final.cmd)
		if err != nil {
			t.Fatalf("CMD: %v", err)
		}
		if !slices.Equal(cmd, []string{"serve"}) {
			t.Errorf("CMD = %q, want [serve]", cmd)
		}

		// COPY --from=STAGE SRC DST: the entrypoint must be DST, and SRC
		// the -o of that stage's go build.
		var from, src, dst string
		for _, c := range final.copies {
			f := strings.Fields(c)
			if len(f) == 3 && strings.HasPrefix(f[0], "--from=") && f[2] == entry[0] {
				from, src, dst = strings.TrimPrefix(f[0], "--from="), f[1], f[2]
			}
		}
		if dst == "" {
			t.Fatalf("ENTRYPOINT %s is not a file copied from a build stage (COPY lines %q)", entry[0], final.copies)
		}
		build := d.stage(from)
		if build == nil {
			t.Fatalf("COPY --from=%s names no stage", from)
		}
		gb, err := findGoBuild(build)
		if err != nil {
			t.Fatal(err)
		}
		if gb.output != src {
			t.Errorf("COPY takes %s from stage %s, but go build writes %q", src, from, gb.output)
		}
	})

	t.Run("listens on every interface", func(t *testing.T) {
		host, _, err := net.SplitHostPort(final.env["XCLOAK_ADDR"])
		if err != nil {
			t.Fatalf("XCLOAK_ADDR %q: %v", final.env["XCLOAK_ADDR"], err)
		}
		if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
			t.Errorf("XCLOAK_ADDR host = %q, want 0.0.0.0: a loopback address is unreachable from outside the container", host)
		}
	})
}

// TestDockerfileBuildIsStatic runs the build stage's go build, word for
// word, and checks that the binary needs no dynamic loader (the final image
// has none), is stripped, and reports the VERSION build argument as its
// version.
func TestDockerfileBuildIsStatic(t *testing.T) {
	d := mustReadDockerfile(t)
	var gb goBuild
	var err error
	var build *stage
	for _, s := range d.stages[:len(d.stages)-1] {
		if gb, err = findGoBuild(s); err == nil {
			build = s
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(gb.env, "CGO_ENABLED=0") {
		t.Errorf("go build environment = %q, want CGO_ENABLED=0", gb.env)
	}
	const ldflags = "-ldflags=-s -w -X main.version=${VERSION}"
	for _, want := range []string{"-trimpath", ldflags} {
		if !slices.Contains(gb.args, want) {
			t.Errorf("go build arguments = %q, want %q", gb.args, want)
		}
	}
	if !slices.Contains(build.args, "VERSION") {
		t.Errorf("the build stage declares ARG %q, want VERSION", build.args)
	}

	out := filepath.Join(t.TempDir(), "xcloak")
	args := slices.Clone(gb.args)
	args[slices.Index(args, "-o")+1] = out
	// What docker build --build-arg VERSION=... makes of it.
	const release = "v0.0.0-dockerfile-test"
	args[slices.Index(args, ldflags)] = strings.ReplaceAll(ldflags, "${VERSION}", release)
	cmd := exec.Command("go", append([]string{"build"}, args...)...)
	cmd.Dir = repoRoot
	// The image is Linux whatever the machine building it.
	cmd.Env = append(append(os.Environ(), gb.env...), "GOOS=linux")
	if output, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", strings.Join(args, " "), err, output)
	}

	f, err := elf.Open(out)
	if err != nil {
		t.Fatalf("binary: %v", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("binary has a PT_INTERP program header: it needs a dynamic loader, which the final image lacks")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("binary imports shared libraries %q (err %v), want none", libs, err)
	}
	if f.Section(".symtab") != nil {
		t.Errorf("binary has a symbol table; -ldflags=-s should strip it")
	}
	if runtime.GOOS != "linux" {
		return // the binary is Linux's
	}
	version, err := exec.Command(out, "version").Output()
	if err != nil {
		t.Fatalf("xcloak version: %v", err)
	}
	if first, _, _ := strings.Cut(string(version), "\n"); first != "version:   "+release {
		t.Errorf("xcloak version printed %q first, want the build argument's %q", first, release)
	}
}

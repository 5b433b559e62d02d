package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// kubernetesDir holds deploy/'s Kubernetes manifests.
var kubernetesDir = filepath.Join(repoRoot, "deploy", "kubernetes")

// The parts of the Kubernetes objects the tests read.
type (
	k8sObject struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
		Spec       yaml.Node         `yaml:"spec"`
		StringData map[string]string `yaml:"stringData"`
	}
	k8sSeccomp struct {
		Type string `yaml:"type"`
	}
	k8sDeploymentSpec struct {
		Replicas int `yaml:"replicas"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				SecurityContext struct {
					RunAsNonRoot   *bool       `yaml:"runAsNonRoot"`
					RunAsUser      *int64      `yaml:"runAsUser"`
					SeccompProfile *k8sSeccomp `yaml:"seccompProfile"`
				} `yaml:"securityContext"`
				Containers []k8sContainer `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	}
	k8sContainer struct {
		Name  string `yaml:"name"`
		Ports []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		Env []struct {
			Name      string  `yaml:"name"`
			Value     *string `yaml:"value"`
			ValueFrom *struct {
				SecretKeyRef *struct {
					Name string `yaml:"name"`
					Key  string `yaml:"key"`
				} `yaml:"secretKeyRef"`
			} `yaml:"valueFrom"`
		} `yaml:"env"`
		StartupProbe   *k8sProbe `yaml:"startupProbe"`
		LivenessProbe  *k8sProbe `yaml:"livenessProbe"`
		ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
		Resources      struct {
			Requests map[string]string `yaml:"requests"`
			Limits   map[string]string `yaml:"limits"`
		} `yaml:"resources"`
		SecurityContext struct {
			AllowPrivilegeEscalation *bool       `yaml:"allowPrivilegeEscalation"`
			ReadOnlyRootFilesystem   *bool       `yaml:"readOnlyRootFilesystem"`
			RunAsNonRoot             *bool       `yaml:"runAsNonRoot"`
			Privileged               *bool       `yaml:"privileged"`
			SeccompProfile           *k8sSeccomp `yaml:"seccompProfile"`
			Capabilities             struct {
				Drop []string `yaml:"drop"`
				Add  []string `yaml:"add"`
			} `yaml:"capabilities"`
		} `yaml:"securityContext"`
	}
	k8sProbe struct {
		HTTPGet *struct {
			Path string `yaml:"path"`
			Port any    `yaml:"port"` // a name or a number
		} `yaml:"httpGet"`
	}
	k8sServiceSpec struct {
		Selector map[string]string `yaml:"selector"`
		Ports    []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort any    `yaml:"targetPort"`
		} `yaml:"ports"`
	}
	k8sPDBSpec struct {
		MinAvailable   any `yaml:"minAvailable"`
		MaxUnavailable any `yaml:"maxUnavailable"`
		Selector       struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
	}
	k8sNetworkPolicySpec struct {
		PodSelector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"podSelector"`
		PolicyTypes []string `yaml:"policyTypes"`
		Ingress     []struct {
			From []struct {
				NamespaceSelector *struct {
					MatchLabels map[string]string `yaml:"matchLabels"`
				} `yaml:"namespaceSelector"`
				PodSelector *yaml.Node `yaml:"podSelector"`
				IPBlock     *yaml.Node `yaml:"ipBlock"`
			} `yaml:"from"`
			Ports []struct {
				Port any `yaml:"port"`
			} `yaml:"ports"`
		} `yaml:"ingress"`
	}
)

// readK8sObjects reads every YAML document of a manifest file.
func readK8sObjects(t *testing.T, path string) []k8sObject {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var objs []k8sObject
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var o k8sObject
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		objs = append(objs, o)
	}
}

// k8sManifests is the objects kustomization.yaml applies, by kind, and the
// example Secret.
type k8sManifests struct {
	deployment, service, pdb k8sObject
	deploymentSpec           k8sDeploymentSpec
	serviceSpec              k8sServiceSpec
	pdbSpec                  k8sPDBSpec
	netpolSpec               k8sNetworkPolicySpec
	secret                   k8sObject
}

func readK8sManifests(t *testing.T) k8sManifests {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(kubernetesDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var kustomization struct {
		Resources []string `yaml:"resources"`
	}
	if err := yaml.Unmarshal(data, &kustomization); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	byKind := make(map[string][]k8sObject)
	for _, r := range kustomization.Resources {
		if strings.Contains(r, "secret") {
			t.Errorf("kustomization.yaml applies %s: the Secret's placeholders must never be applied", r)
		}
		for _, o := range readK8sObjects(t, filepath.Join(kubernetesDir, r)) {
			byKind[o.Kind] = append(byKind[o.Kind], o)
		}
	}
	one := func(kind string, spec any) k8sObject {
		if len(byKind[kind]) != 1 {
			t.Fatalf("kustomization.yaml applies %d objects of kind %s, want one", len(byKind[kind]), kind)
		}
		o := byKind[kind][0]
		if spec != nil {
			if err := o.Spec.Decode(spec); err != nil {
				t.Fatalf("%s spec: %v", kind, err)
			}
		}
		return o
	}
	var m k8sManifests
	m.deployment = one("Deployment", &m.deploymentSpec)
	m.service = one("Service", &m.serviceSpec)
	m.pdb = one("PodDisruptionBudget", &m.pdbSpec)
	one("NetworkPolicy", &m.netpolSpec)
	secrets := readK8sObjects(t, filepath.Join(kubernetesDir, "secret.example.yaml"))
	if len(secrets) != 1 || secrets[0].Kind != "Secret" {
		t.Fatalf("secret.example.yaml: want one Secret, got %+v", secrets)
	}
	m.secret = secrets[0]
	return m
}

// container is the Deployment's XCloak container.
func (m k8sManifests) container(t *testing.T) k8sContainer {
	t.Helper()
	cs := m.deploymentSpec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("Deployment has %d containers, want one", len(cs))
	}
	return cs[0]
}

// portNumber resolves a probe's or a Service's port, a name or a number,
// to a number of c's ports.
func (c k8sContainer) portNumber(t *testing.T, port any) int {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name != "" && p.Name == port || p.ContainerPort == port {
			return p.ContainerPort
		}
	}
	t.Fatalf("port %v is none of the container's %+v", port, c.Ports)
	return 0
}

// env is the container's environment with the example Secret's values for
// its references, and the names of the variables taken from the Secret.
func (m k8sManifests) env(t *testing.T) (vars map[string]string, fromSecret []string) {
	t.Helper()
	vars = make(map[string]string)
	for _, e := range m.container(t).Env {
		switch {
		case e.Value != nil:
			vars[e.Name] = *e.Value
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			if ref.Name != m.secret.Metadata.Name {
				t.Errorf("env %s comes from Secret %q; the example Secret is %q", e.Name, ref.Name, m.secret.Metadata.Name)
			}
			v, ok := m.secret.StringData[ref.Key]
			if !ok {
				t.Errorf("env %s comes from key %s, which the example Secret lacks", e.Name, ref.Key)
			}
			vars[e.Name] = v
			fromSecret = append(fromSecret, e.Name)
		default:
			t.Errorf("env %s has neither a value nor a Secret reference", e.Name)
		}
	}
	return vars, fromSecret
}

func TestKubernetesDeploymentIsLockedDown(t *testing.T) {
	m := readK8sManifests(t)
	pod := m.deploymentSpec.Template.Spec
	c := m.container(t)
	isTrue := func(b *bool) bool { return b != nil && *b }
	isFalse := func(b *bool) bool { return b != nil && !*b }

	if !isTrue(pod.SecurityContext.RunAsNonRoot) && !isTrue(c.SecurityContext.RunAsNonRoot) {
		t.Error("runAsNonRoot is not true")
	}
	if u := pod.SecurityContext.RunAsUser; u == nil || *u == 0 {
		t.Errorf("pod runAsUser = %v, want the image's non-root user", u)
	}
	seccomp := c.SecurityContext.SeccompProfile
	if seccomp == nil {
		seccomp = pod.SecurityContext.SeccompProfile
	}
	if seccomp == nil || seccomp.Type != "RuntimeDefault" {
		t.Errorf("seccompProfile = %+v, want RuntimeDefault", seccomp)
	}
	if !isFalse(c.SecurityContext.AllowPrivilegeEscalation) {
		t.Error("allowPrivilegeEscalation is not false")
	}
	if !isTrue(c.SecurityContext.ReadOnlyRootFilesystem) {
		t.Error("readOnlyRootFilesystem is not true")
	}
	if isTrue(c.SecurityContext.Privileged) {
		t.Error("the container is privileged")
	}
	if !slices.Contains(c.SecurityContext.Capabilities.Drop, "ALL") || len(c.SecurityContext.Capabilities.Add) > 0 {
		t.Errorf("capabilities = %+v, want ALL dropped and none added", c.SecurityContext.Capabilities)
	}
	for _, r := range []string{"cpu", "memory"} {
		if m.container(t).Resources.Requests[r] == "" {
			t.Errorf("resources.requests.%s unset", r)
		}
	}
	if c.Resources.Limits["memory"] == "" {
		t.Error("resources.limits.memory unset")
	}
}

func TestKubernetesProbesAndPorts(t *testing.T) {
	m := readK8sManifests(t)
	c := m.container(t)
	vars, _ := m.env(t)

	addr := vars["XCLOAK_ADDR"]
	if addr == "" {
		addr = mustReadDockerfile(t).final.env["XCLOAK_ADDR"]
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("XCLOAK_ADDR %q: %v", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
		t.Errorf("XCLOAK_ADDR host = %q, want every interface: the kubelet probes the pod's IP", host)
	}
	serving, _ := strconv.Atoi(port)

	routes, err := os.ReadFile(filepath.Join(repoRoot, "web", "routes.go"))
	if err != nil {
		t.Fatal(err)
	}
	probes := []struct {
		name  string
		probe *k8sProbe
		path  string
	}{
		{"livenessProbe", c.LivenessProbe, "/healthz"},
		{"readinessProbe", c.ReadinessProbe, "/readyz"},
		{"startupProbe", c.StartupProbe, "/healthz"},
	}
	for _, p := range probes {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: want an httpGet of %s", p.name, p.path)
			continue
		}
		if got := p.probe.HTTPGet.Path; got != p.path {
			t.Errorf("%s path = %s, want %s", p.name, got, p.path)
		}
		if !regexp.MustCompile(`handle\("GET ` + regexp.QuoteMeta(p.probe.HTTPGet.Path) + `"`).Match(routes) {
			t.Errorf("%s path %s is no route of web/routes.go", p.name, p.probe.HTTPGet.Path)
		}
		if got := c.portNumber(t, p.probe.HTTPGet.Port); got != serving {
			t.Errorf("%s port = %d, want %d, where XCLOAK_ADDR listens", p.name, got, serving)
		}
	}

	// The Service's http port reaches the server; its metrics port, if
	// any, the metrics listener.
	metricsPort := -1
	if _, p, err := net.SplitHostPort(vars["XCLOAK_METRICS_ADDR"]); err == nil {
		metricsPort, _ = strconv.Atoi(p)
	}
	for _, p := range m.serviceSpec.Ports {
		target := c.portNumber(t, p.TargetPort)
		switch p.Name {
		case "http":
			if target != serving {
				t.Errorf("Service port http targets %d, want %d, where XCLOAK_ADDR listens", target, serving)
			}
		case "metrics":
			if target != metricsPort {
				t.Errorf("Service port metrics targets %d, want %d, where XCLOAK_METRICS_ADDR listens", target, metricsPort)
			}
		default:
			t.Errorf("Service port %q: want http or metrics", p.Name)
		}
	}
	if metricsPort == serving {
		t.Error("metrics are served on the main port, which the Ingress routes")
	}

	// The probes answer 200 on a real server.
	s := startServe(t, storeSettings(t))
	for _, p := range probes {
		if p.probe == nil || p.probe.HTTPGet == nil {
			continue
		}
		if status, body := fetch(t, s.base+p.probe.HTTPGet.Path); status != http.StatusOK {
			t.Errorf("%s: GET %s = %d %s, want 200", p.name, p.probe.HTTPGet.Path, status, body)
		}
	}
}

func TestKubernetesSelectorsAndSecrets(t *testing.T) {
	m := readK8sManifests(t)
	labels := m.deploymentSpec.Template.Metadata.Labels
	matches := func(selector map[string]string) bool {
		if len(selector) == 0 {
			return false
		}
		for k, v := range selector {
			if labels[k] != v {
				return false
			}
		}
		return true
	}
	if !matches(m.deploymentSpec.Selector.MatchLabels) {
		t.Errorf("Deployment selector %v does not select its pods %v", m.deploymentSpec.Selector.MatchLabels, labels)
	}
	if !matches(m.serviceSpec.Selector) {
		t.Errorf("Service selector %v does not select the pods %v", m.serviceSpec.Selector, labels)
	}
	if !matches(m.pdbSpec.Selector.MatchLabels) {
		t.Errorf("PodDisruptionBudget selector %v does not select the pods %v", m.pdbSpec.Selector.MatchLabels, labels)
	}
	if m.pdbSpec.MinAvailable == nil && m.pdbSpec.MaxUnavailable == nil {
		t.Error("PodDisruptionBudget sets neither minAvailable nor maxUnavailable")
	}
	if n, ok := m.pdbSpec.MinAvailable.(int); ok && n >= m.deploymentSpec.Replicas {
		t.Errorf("PodDisruptionBudget minAvailable %d with %d replicas blocks every drain", n, m.deploymentSpec.Replicas)
	}

	vars, fromSecret := m.env(t)
	known := make(map[string]bool)
	for _, s := range settings {
		known[s.env] = true
		if s.fromFile {
			known[s.env+"_FILE"] = true
		}
	}
	for name := range vars {
		if !known[name] {
			t.Errorf("env %s is no setting of xcloak serve", name)
		}
	}
	for _, name := range []string{"XCLOAK_SECRET", "XCLOAK_DATABASE_URL", "XCLOAK_REDIS_URL"} {
		if !slices.Contains(fromSecret, name) {
			t.Errorf("env %s does not come from the Secret", name)
		}
	}
	// The example is what operators copy: its connections are over TLS,
	// the server checked, and it offers the key that seals second factors.
	if !strings.Contains(vars["XCLOAK_DATABASE_URL"], "sslmode=verify-full") {
		t.Errorf("the example Secret's XCLOAK_DATABASE_URL %q does not check the server's certificate (sslmode=verify-full)", vars["XCLOAK_DATABASE_URL"])
	}
	if !strings.HasPrefix(vars["XCLOAK_REDIS_URL"], "rediss://") {
		t.Errorf("the example Secret's XCLOAK_REDIS_URL %q is not over TLS (rediss://)", vars["XCLOAK_REDIS_URL"])
	}
	if !slices.Contains(fromSecret, "XCLOAK_MFA_KEY") {
		t.Error("env XCLOAK_MFA_KEY does not come from the Secret")
	}
	if vars["XCLOAK_SECRET"] != "" {
		t.Error("the example Secret holds a value for XCLOAK_SECRET: it must hold none, so that it cannot be used as it is")
	}

	// serve accepts the environment once the secret is filled in.
	vars["XCLOAK_SECRET"] = testSecret
	image := mustReadDockerfile(t).final.env
	getenv := func(k string) string {
		if v, ok := vars[k]; ok {
			return v
		}
		return image[k]
	}
	if _, err := loadConfig(flag.NewFlagSet("serve", flag.ContinueOnError), nil, getenv, io.Discard, io.Discard, forServe); err != nil {
		t.Errorf("xcloak serve rejects the Deployment's environment: %v", err)
	}
}

// TestKubernetesNetworkPolicy: the pods take connections on their ports
// alone, each from peers of its own: the http port from the Ingress
// controller's namespace (any pod that reached it could write the
// X-Forwarded-For a trusted proxy's address is believed for), the metrics
// port from Prometheus' and never from the Ingress'.
func TestKubernetesNetworkPolicy(t *testing.T) {
	m := readK8sManifests(t)
	np, c := m.netpolSpec, m.container(t)
	for k, v := range m.deploymentSpec.Template.Metadata.Labels {
		if np.PodSelector.MatchLabels[k] != v {
			t.Errorf("NetworkPolicy podSelector %v does not select the pods %v", np.PodSelector.MatchLabels, m.deploymentSpec.Template.Metadata.Labels)
			break
		}
	}
	if !slices.Contains(np.PolicyTypes, "Ingress") {
		t.Errorf("NetworkPolicy policyTypes %v leave ingress open", np.PolicyTypes)
	}
	peers := map[int][]string{} // port: namespaces allowed
	for _, rule := range np.Ingress {
		if len(rule.From) == 0 || len(rule.Ports) == 0 {
			t.Errorf("an ingress rule open to every peer or every port: %+v", rule)
		}
		for _, from := range rule.From {
			if from.NamespaceSelector == nil || len(from.NamespaceSelector.MatchLabels) == 0 || from.PodSelector != nil || from.IPBlock != nil {
				t.Errorf("an ingress peer that is not one namespace: %+v", from)
				continue
			}
			for _, p := range rule.Ports {
				port := c.portNumber(t, p.Port)
				peers[port] = append(peers[port], from.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])
			}
		}
	}
	http, metrics := c.portNumber(t, "http"), c.portNumber(t, "metrics")
	if len(peers[http]) == 0 || len(peers[metrics]) == 0 || len(peers) != 2 {
		t.Fatalf("NetworkPolicy admits %v; want the http and metrics ports alone, each from a namespace", peers)
	}
	for _, ns := range peers[metrics] {
		if slices.Contains(peers[http], ns) {
			t.Errorf("the metrics port is open to %s, which reaches the http port: the Ingress'", ns)
		}
	}
}

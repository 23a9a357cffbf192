package deploy_test

import (
	"maps"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"

	"github.com/seckill-lab/seckill/app/server"
)

// manifests are deploy/kubernetes/seckill.yaml's objects, each decoded
// strictly: a misspelt or misplaced field fails, as kubectl's server-side
// validation would.
type manifests struct {
	config     corev1.ConfigMap
	secret     corev1.Secret
	deployment appsv1.Deployment
	service    corev1.Service // the API's
	metrics    corev1.Service
	budget     policyv1.PodDisruptionBudget
	policies   map[string]networkingv1.NetworkPolicy
}

func readManifests(t *testing.T) manifests {
	t.Helper()
	raw, err := os.ReadFile("kubernetes/seckill.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := manifests{policies: map[string]networkingv1.NetworkPolicy{}}
	into := map[string]any{"ConfigMap": &m.config, "Secret": &m.secret, "Deployment": &m.deployment,
		"Service/seckill": &m.service, "Service/seckill-metrics": &m.metrics, "PodDisruptionBudget": &m.budget}
	seen := map[string]bool{}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var head struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatal(err)
		}
		if head.Kind == "NetworkPolicy" {
			var p networkingv1.NetworkPolicy
			if err := yaml.UnmarshalStrict([]byte(doc), &p); err != nil {
				t.Fatalf("NetworkPolicy: %v", err)
			}
			m.policies[p.Name] = p
			continue
		}
		kind := head.Kind
		if kind == "Service" {
			kind += "/" + head.Metadata.Name
		}
		obj, ok := into[kind]
		if !ok || seen[kind] {
			t.Fatalf("a %q document: want one each of %v", kind, slices.Sorted(maps.Keys(into)))
		}
		seen[kind] = true
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
	}
	if len(seen) != len(into) {
		t.Fatalf("found %v, want every one of %d kinds", seen, len(into))
	}
	return m
}

// TestTheKubernetesManifestsDeployTheServerAsTheDocsSay: the manifests
// decode strictly, and say what docs/production.md asks of a deployment:
// two replicas at least, never fewer than one through a disruption; ready
// on /readyz, alive on /healthz; a grace period past the server's 9 s stop
// and the preStop wait; resources; the image's non-root user; every
// setting a variable the server reads, the secret ones in the Secret.
func TestTheKubernetesManifestsDeployTheServerAsTheDocsSay(t *testing.T) {
	m := readManifests(t)
	d := m.deployment.Spec
	if d.Replicas == nil || *d.Replicas < 2 {
		t.Errorf("replicas %v, want at least 2", d.Replicas)
	}
	pod := d.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want the server alone", len(pod.Containers))
	}
	c := pod.Containers[0]
	checkProbes(t, c)
	preStop := int64(0)
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
		preStop = c.Lifecycle.PreStop.Sleep.Seconds
	}
	grace := int64(30) // Kubernetes' default
	if pod.TerminationGracePeriodSeconds != nil {
		grace = *pod.TerminationGracePeriodSeconds
	}
	if preStop < 3 || grace < preStop+10 {
		t.Errorf("preStop sleep %ds, grace %ds: want a wait for the endpoints, then the 9 s stop, within the grace", preStop, grace)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: want CPU and memory requested and memory limited", c.Resources)
	}
	sc := pod.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65532 {
		t.Errorf("pod security context %+v: want non-root, as the image's user 65532", sc)
	}
	if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem ||
		c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation {
		t.Errorf("container security context %+v: want a read-only root and no privilege escalation", c.SecurityContext)
	}
	checkSettings(t, m, c)
	labels := d.Template.Labels
	for what, selector := range map[string]map[string]string{"deployment": d.Selector.MatchLabels, "service": m.service.Spec.Selector,
		"disruption budget": m.budget.Spec.Selector.MatchLabels} {
		for k, v := range selector {
			if labels[k] != v || len(selector) == 0 {
				t.Errorf("the %s selects %v; the pods are labelled %v", what, selector, labels)
			}
		}
	}
	if b := m.budget.Spec.MinAvailable; b == nil || b.IntValue() < 1 || d.Replicas == nil || b.IntValue() >= int(*d.Replicas) {
		t.Errorf("disruption budget minAvailable %v with %v replicas: want at least 1, fewer than the replicas", b, d.Replicas)
	}
}

// checkProbes: readiness is /readyz, liveness /healthz, both on the port
// the server listens on (SECKILL_ADDR's default, the image's).
func checkProbes(t *testing.T, c corev1.Container) {
	t.Helper()
	port := func(name string) int32 {
		for _, p := range c.Ports {
			if p.Name == name {
				return p.ContainerPort
			}
		}
		return 0
	}
	for what, probe := range map[string]*corev1.Probe{"/readyz": c.ReadinessProbe, "/healthz": c.LivenessProbe} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != what || port(probe.HTTPGet.Port.String()) != 8080 {
			t.Errorf("want a probe GET %s on the API's port 8080; got %+v", what, probe)
		}
	}
}

// checkSettings: every ConfigMap and Secret key is a variable the server
// reads, none in both, the secrets in the Secret; both reach the
// container; the metrics listener is a port the pod declares.
func checkSettings(t *testing.T, m manifests, c corev1.Container) {
	t.Helper()
	declared := map[string]bool{}
	for _, v := range server.Variables() {
		declared[v.Name] = true
	}
	secrets := []string{"SECKILL_JWT_SECRET", "SECKILL_ADMIN_TOKEN", "SECKILL_CODE_WEBHOOK_SECRET", "SECKILL_PAY_SECRET", "SECKILL_MYSQL_DSN"}
	for name := range m.config.Data {
		if !declared[name] {
			t.Errorf("the ConfigMap sets %s, which the server does not read", name)
		}
		if slices.Contains(secrets, name) {
			t.Errorf("the ConfigMap holds %s, a secret", name)
		}
		if _, both := m.secret.StringData[name]; both {
			t.Errorf("%s is in the ConfigMap and the Secret", name)
		}
	}
	for name := range m.secret.StringData {
		if !declared[name] {
			t.Errorf("the Secret sets %s, which the server does not read", name)
		}
	}
	for _, name := range []string{"SECKILL_JWT_SECRET", "SECKILL_ADMIN_TOKEN", "SECKILL_MYSQL_DSN"} {
		if _, ok := m.secret.StringData[name]; !ok {
			t.Errorf("the Secret lacks %s, which real servers require", name)
		}
	}
	var fromConfig, fromSecret bool
	for _, e := range c.EnvFrom {
		fromConfig = fromConfig || (e.ConfigMapRef != nil && e.ConfigMapRef.Name == m.config.Name)
		fromSecret = fromSecret || (e.SecretRef != nil && e.SecretRef.Name == m.secret.Name)
	}
	if !fromConfig || !fromSecret {
		t.Errorf("the container takes its environment from the ConfigMap %v and the Secret %v; want both", fromConfig, fromSecret)
	}
	if addr := m.config.Data["SECKILL_METRICS_ADDR"]; addr != "" {
		_, port, _ := net.SplitHostPort(addr)
		if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return strconv.Itoa(int(p.ContainerPort)) == port }) {
			t.Errorf("SECKILL_METRICS_ADDR=%s: the pod declares no such port", addr)
		}
	}
}

// TestTheKubernetesManifestsAreLockedDown is the security review's finding
// on the manifests, held: the unauthenticated metrics port was on the API's
// Service, nothing restricted who reached what, SECKILL_TRUSTED_PROXIES
// trusted X-Forwarded-For from any pod (10.0.0.0/8: every per-address limit
// void), the service-account token was mounted and the image was :latest.
// Now the API's Service has the API alone and the metrics a Service of
// their own; a NetworkPolicy lets the API be reached from the ingress
// controller only and the metrics from the monitoring namespace only, and
// another lets Redis and MySQL be reached from the server's pods only; each
// trusted proxy is a /24 or narrower; no token is mounted; the image's tag
// names a build.
func TestTheKubernetesManifestsAreLockedDown(t *testing.T) {
	m := readManifests(t)
	for _, p := range m.service.Spec.Ports {
		if p.TargetPort.String() != "http" {
			t.Errorf("the API's Service exposes %s (target %s): want the API alone", p.Name, p.TargetPort.String())
		}
	}
	if ps := m.metrics.Spec.Ports; len(ps) != 1 || ps[0].TargetPort.String() != "metrics" {
		t.Errorf("the metrics' Service ports %+v: want the metrics port alone", ps)
	}
	api, ok := m.policies["seckill"]
	if !ok || api.Spec.PodSelector.MatchLabels["app.kubernetes.io/name"] != "seckill" {
		t.Fatalf("no NetworkPolicy selecting the server's pods: %v", slices.Sorted(maps.Keys(m.policies)))
	}
	from := map[string]string{} // port name -> the namespace allowed
	for _, rule := range api.Spec.Ingress {
		for _, port := range rule.Ports {
			for _, peer := range rule.From {
				if peer.NamespaceSelector == nil || peer.IPBlock != nil {
					t.Errorf("port %s is open to %+v: want a namespace's pods", port.Port.String(), peer)
					continue
				}
				from[port.Port.String()] = peer.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]
			}
		}
	}
	if from["http"] != "ingress-nginx" || from["metrics"] != "monitoring" || len(from) != 2 {
		t.Errorf("the server's pods take %v: want http from the ingress controller's namespace, metrics from monitoring, nothing else", from)
	}
	data, ok := m.policies["seckill-data"]
	if !ok || len(data.Spec.Ingress) != 1 || len(data.Spec.Ingress[0].From) != 1 ||
		data.Spec.Ingress[0].From[0].PodSelector.MatchLabels["app.kubernetes.io/name"] != "seckill" {
		t.Errorf("Redis and MySQL: %+v, want reached from the server's pods only", data.Spec)
	}
	for _, p := range strings.Split(m.config.Data["SECKILL_TRUSTED_PROXIES"], ",") {
		prefix, err := netip.ParsePrefix(strings.TrimSpace(p))
		if err != nil || prefix.Bits() < map[bool]int{true: 24, false: 64}[prefix.Addr().Is4()] {
			t.Errorf("SECKILL_TRUSTED_PROXIES holds %q: want the ingress controller's pods, each /24 or narrower", p)
		}
	}
	pod := m.deployment.Spec.Template.Spec
	if a := pod.AutomountServiceAccountToken; a == nil || *a {
		t.Errorf("automountServiceAccountToken %v: want false", a)
	}
	image := pod.Containers[0].Image
	if _, tag, ok := strings.Cut(image[strings.LastIndex(image, "/")+1:], ":"); !ok || tag == "" || tag == "latest" {
		t.Errorf("image %q: want a tag that names the build", image)
	}
}

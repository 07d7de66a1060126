package action

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// fakeRuntime dials from the host; the commands it runs exit with code.
type fakeRuntime struct {
	code int
}

func (f *fakeRuntime) Exec(context.Context, []string, io.Writer, io.Writer) (int, error) {
	return f.code, nil
}

func (f *fakeRuntime) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, address)
}

// handlerTarget is a container with a named port, probed through the fake runtime.
func handlerTarget(port int) (*fakeRuntime, *corev1.Container) {
	c := &corev1.Container{Name: "c", Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: int32(port)}}}
	return &fakeRuntime{}, c
}

func serverPort(t *testing.T, rawURL string) int {
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(u.Port())
	return p
}

func TestHTTPAction(t *testing.T) {
	var gotHeader, gotUA string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		gotHeader, gotUA = req.Header.Get("X-Probe"), req.UserAgent()
		switch req.URL.Path {
		case "/ok":
		case "/redirect":
			http.Redirect(w, req, "/ok", http.StatusFound)
		case "/elsewhere":
			http.Redirect(w, req, "http://example.invalid/", http.StatusFound)
		case "/fail":
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	rt, c := handlerTarget(serverPort(t, srv.URL))
	for path, wantOK := range map[string]bool{"/ok": true, "/redirect": true, "/elsewhere": true, "/fail": false} {
		a := Handler{httpGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("web"), Scheme: corev1.URISchemeHTTP,
			HTTPHeaders: []corev1.HTTPHeader{{Name: "X-Probe", Value: "yes"}}}}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := Run(ctx, rt, c, a)
		cancel()
		if (err == nil) != wantOK {
			t.Errorf("GET %s: %v, want ok=%v", path, err, wantOK)
		}
	}
	if gotHeader != "yes" || !strings.HasPrefix(gotUA, "kube-probe/") {
		t.Errorf("server saw header %q and user agent %q", gotHeader, gotUA)
	}
}

func TestTCPAndGRPCActions(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go srv.Serve(lis)
	defer srv.Stop()
	port := lis.Addr().(*net.TCPAddr).Port
	rt, c := handlerTarget(port)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	if err := Run(ctx, rt, c, Handler{tcp: &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}}); err != nil {
		t.Errorf("tcpSocket to a listening port: %v", err)
	}
	if err := Run(ctx, rt, c, Handler{grpc: &corev1.GRPCAction{Port: int32(port)}}); err != nil {
		t.Errorf("grpc health of a serving server: %v", err)
	}
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	if err := Run(ctx, rt, c, Handler{grpc: &corev1.GRPCAction{Port: int32(port)}}); err == nil {
		t.Error("grpc health of a NOT_SERVING server succeeded")
	}
	srv.Stop()
	if err := Run(ctx, rt, c, Handler{tcp: &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}}); err == nil {
		t.Error("tcpSocket to a closed port succeeded")
	}
}

func TestExecActionAndSleep(t *testing.T) {
	rt, c := handlerTarget(0)
	ctx := context.Background()
	if err := Run(ctx, rt, c, Handler{exec: &corev1.ExecAction{Command: []string{"true"}}}); err != nil {
		t.Errorf("exec exiting 0: %v", err)
	}
	rt.code = 1
	if err := Run(ctx, rt, c, Handler{exec: &corev1.ExecAction{Command: []string{"false"}}}); err == nil || !strings.Contains(err.Error(), "exited with 1") {
		t.Errorf("exec exiting 1: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := Run(short, rt, c, Handler{sleep: &corev1.SleepAction{Seconds: 5}}); err == nil {
		t.Error("a sleep longer than its deadline succeeded")
	}
}

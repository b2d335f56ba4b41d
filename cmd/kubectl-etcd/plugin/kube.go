package plugin

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/etcdhook/etcdhook/api"
)

// GVR is the EtcdCluster resource.
var GVR = schema.GroupVersionResource{Group: api.Group, Version: api.Version, Resource: "etcdclusters"}

// Clients is what a command needs from the API server. Tests build it from fake clients.
type Clients struct {
	Namespace string
	Kube      kubernetes.Interface
	Dynamic   dynamic.Interface
	// Exec runs a command in a container and streams its output (kubectl exec without a TTY).
	Exec Executor
	// Logs is a container's log (kubectl logs).
	Logs func(ctx context.Context, namespace, pod, container string) (string, error)
}

// Executor runs cmd in namespace/pod/container; stdin may be nil.
type Executor func(ctx context.Context, namespace, pod, container string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) error

// KubeFlags are kubectl's connection flags (--kubeconfig, --context, -n/--namespace, --cluster, --user,
// --server, --token, --as, ...), bound with client-go's clientcmd: the same names and meanings
// k8s.io/cli-runtime's genericclioptions gives kubectl, without cli-runtime's dependencies (cobra,
// kustomize) for a plugin that needs none of its resource builder.
type KubeFlags struct {
	kubeconfig string
	overrides  clientcmd.ConfigOverrides
}

func (k *KubeFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster)")
	clientcmd.BindOverrideFlags(&k.overrides, fs, clientcmd.RecommendedConfigOverrideFlags(""))
}

// connect resolves the kubeconfig the way kubectl does and returns real clients.
func (k *KubeFlags) connect() (*Clients, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &k.overrides)
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, err
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, err
	}
	return NewClients(cfg, ns)
}

// NewClients builds the clients of a rest.Config for namespace ns.
func NewClients(cfg *rest.Config, ns string) (*Clients, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	logs := func(ctx context.Context, namespace, pod, container string) (string, error) {
		b, err := kube.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
		return string(b), err
	}
	return &Clients{Namespace: ns, Kube: kube, Dynamic: dyn, Exec: podExecutor(cfg, kube), Logs: logs}, nil
}

// podExecutor is kubectl exec's transport: WebSocket first, SPDY when the API server (older than 1.30,
// or a proxy) refuses the upgrade.
func podExecutor(cfg *rest.Config, kube kubernetes.Interface) Executor {
	return func(ctx context.Context, namespace, pod, container string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) error {
		req := kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("exec").
			VersionedParams(&corev1.PodExecOptions{
				Container: container, Command: cmd, Stdin: stdin != nil, Stdout: true, Stderr: true,
			}, scheme.ParameterCodec)
		ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
		if err != nil {
			return err
		}
		spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
		if err != nil {
			return err
		}
		ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
			return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
		})
		if err != nil {
			return err
		}
		opts := remotecommand.StreamOptions{Stdout: stdout, Stderr: stderr}
		if stdin != nil {
			opts.Stdin = stdin
		}
		if err := ex.StreamWithContext(ctx, opts); err != nil {
			return fmt.Errorf("exec in pod %s/%s: %w", namespace, pod, err)
		}
		return nil
	}
}

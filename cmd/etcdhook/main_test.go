package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
)

// The StatefulSet the hook renders runs the agent exactly as `etcdhook agent` parses it, with the
// configuration the ConfigMap carries: the template and the agent are kept in step by this test.
func TestTemplateRunsTheAgentAsItParses(t *testing.T) {
	b, err := os.ReadFile("../../hooks/testdata/sync/new-cluster-size-5-custom.response.json")
	require.NoError(t, err)
	var resp struct {
		Children []map[string]any `json:"children"`
	}
	require.NoError(t, json.Unmarshal(b, &resp))
	var command []string
	var agentJSON string
	for _, c := range resp.Children {
		switch c["kind"] {
		case "StatefulSet":
			ctr := c["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
			for _, a := range ctr["command"].([]any) {
				command = append(command, a.(string))
			}
		case "ConfigMap":
			agentJSON = c["data"].(map[string]any)[api.ConfigKeyAgent].(string)
		}
	}
	require.Equal(t, api.AgentBinary, command[0])
	require.Equal(t, "agent", command[1])
	configPath, transition, etcdCmd, err := parseAgentArgs(command[2:])
	require.NoError(t, err)
	require.Empty(t, transition, "no TLS switch")
	require.Equal(t, api.AgentConfigPath, configPath)
	require.Equal(t, api.EtcdBinary, etcdCmd[0])

	dec := json.NewDecoder(bytes.NewReader([]byte(agentJSON)))
	dec.DisallowUnknownFields()
	var cfg api.AgentConfig
	require.NoError(t, dec.Decode(&cfg), "the ConfigMap's agent.json is what the agent reads")
	flags := strings.Join(etcdCmd, " ")
	require.Contains(t, flags, "--data-dir="+cfg.DataDir)
	require.Contains(t, flags, fmt.Sprintf("--listen-metrics-urls=http://127.0.0.1:%d", cfg.EtcdMetricsPort))
	require.NotNil(t, cfg.TLS, "a new cluster runs TLS")
	require.Contains(t, flags, fmt.Sprintf("--listen-client-urls=https://0.0.0.0:%d", cfg.ClientPort))
	// The agent writes the member certificate where etcd's flags look for it.
	require.Contains(t, flags, "--cert-file="+api.TLSClientDir+"/tls.crt")
	require.Contains(t, flags, "--peer-trusted-ca-file="+api.TLSPeerDir+"/ca.crt")
	_, err = time.ParseDuration(cfg.TLS.CertDuration)
	require.NoError(t, err, "the agent parses the certificate lifetime")
	require.Contains(t, flags, "--initial-cluster-token="+cfg.Token)
	require.Contains(t, flags, "--quota-backend-bytes=8589934592")
	require.NotContains(t, flags, "--initial-cluster=")
	require.NotContains(t, flags, "--initial-cluster-state")
}

func TestAgentRefusesFlagsItDecides(t *testing.T) {
	_, _, _, err := parseAgentArgs([]string{"--", "/usr/local/bin/etcd", "--initial-cluster-state=new"})
	require.Error(t, err)
	_, _, _, err = parseAgentArgs([]string{"--config=x"})
	require.Error(t, err)
	_, _, _, err = parseAgentArgs([]string{"--tls-transition=ftp", "--", "/usr/local/bin/etcd", "--cert-file=x"})
	require.Error(t, err, "the scheme left is http or https")
	_, _, _, err = parseAgentArgs([]string{"--tls-transition=http", "--", "/usr/local/bin/etcd"})
	require.Error(t, err, "a transition without certificates could not listen on https")
	_, tr, _, err := parseAgentArgs([]string{"--tls-transition=http", "--", "/usr/local/bin/etcd", "--cert-file=x"})
	require.NoError(t, err)
	require.Equal(t, "http", tr)
}

// Every command takes --log-level; an unknown level is a usage error, not a silent default.
func TestLogLevelFlag(t *testing.T) {
	defer logLevel.Set(slog.LevelInfo)
	_, _, _, err := parseAgentArgs([]string{"--log-level=debug", "--", "/usr/local/bin/etcd"})
	require.NoError(t, err)
	require.Equal(t, slog.LevelDebug, logLevel.Level())
	_, _, _, err = parseAgentArgs([]string{"--log-level=loud", "--", "/usr/local/bin/etcd"})
	require.Error(t, err)
	for _, cmd := range [][]string{{"serve", "--log-level=loud"}, {"backup", "--log-level=loud"}, {"restore", "--log-level=loud"},
		{"member", "remove", "--log-level=loud"}, {"pvc", "delete", "--log-level=loud"}} {
		err := commands[cmd[0]](cmd[1:])
		var ue usageError
		require.ErrorAs(t, err, &ue, "%v", cmd)
		require.Contains(t, err.Error(), "log-level", "%v", cmd)
	}
}

// A Job command missing a required flag is a usage error naming every required flag.
func TestRequiredFlags(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	for _, tc := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"backup"}, "--cluster, --namespace, --endpoints and --destination are required"},
		{[]string{"restore"}, "--from, --data-dir, --name and --peer-url are required"},
		{[]string{"member", "remove"}, "--id and --endpoints are required"},
		{[]string{"pvc", "delete"}, "--claim, --namespace, --cluster-uid, --peer-url and --endpoints are required"},
		{[]string{"pvc", "grow"}, "--claim, --namespace, --cluster-uid, --size and --endpoints are required"},
		{[]string{"statefulset", "orphan"}, "--name, --namespace, --uid and --size are required"},
		{[]string{"pvc", "grow", "--claim=c", "--namespace=n", "--cluster-uid=u", "--endpoints=e", "--size=0"}, "--size must be a positive quantity such as 20Gi"},
		{[]string{"statefulset", "orphan", "--name=s", "--namespace=n", "--uid=u", "--size=big"}, "--size must be a positive quantity such as 20Gi"},
	} {
		err := commands[tc.cmd[0]](tc.cmd[1:])
		var ue usageError
		require.ErrorAs(t, err, &ue, "%v", tc.cmd)
		require.EqualError(t, err, tc.want, "%v", tc.cmd)
	}
}

// The chart's ETCDHOOK_LOG_LEVEL is read by serve; a bad value is refused before anything starts.
func TestServeLogLevelFromEnvironment(t *testing.T) {
	defer logLevel.Set(slog.LevelInfo)
	t.Setenv("ETCDHOOK_LOG_LEVEL", "loud")
	var ue usageError
	require.ErrorAs(t, runServe(nil), &ue)
	require.Contains(t, runServe(nil).Error(), "ETCDHOOK_LOG_LEVEL")
}

package devenv

// fastControllerArgs lift kube-controller-manager's client limits (default 20 requests per
// second, burst 30) in a Fast environment, so that tests and benchmarks that finish
// hundreds of Jobs at once measure datajobs, not the Job controller's queue.
func fastControllerArgs(cfg Config) []string {
	if !cfg.Fast {
		return nil
	}
	return []string{"--kube-api-qps=500", "--kube-api-burst=1000"}
}

package injection

import (
	"fmt"
	"net/url"
	"strings"
)

// notFoundAtWebhook is the apiserver's words for a webhook whose backend
// answered 404: it is reached, but not at a path it serves.
const notFoundAtWebhook = "the server could not find the requested resource"

// wrongPathFix is the fix for an Istio webhook whose backend answers 404 (a
// hand-written or edited tag or revision webhook with a path istiod does
// not serve): its configuration's webhooks that post there are pointed at
// the path another webhook of the same revision posts to on the same
// backend, which istiod answers. "" when no such webhook says which path.
func wrongPathFix(blocked string, evals []*webhookEval, e *webhookEval) string {
	if e == nil || e.url == "" || !strings.Contains(blocked, notFoundAtWebhook) {
		return ""
	}
	bad, err := url.Parse(e.url)
	if err != nil {
		return ""
	}
	good := ""
	for _, o := range evals {
		if o.config == e.config || o.revision != e.revision || o.url == "" || o.backendIssue != "" {
			continue
		}
		if u, err := url.Parse(o.url); err == nil && u.Host == bad.Host && u.Path != bad.Path && u.Path != "" {
			good = u.Path
			break
		}
	}
	if good == "" {
		return ""
	}
	var ops []string
	for _, o := range evals {
		if o.config != e.config || o.url != e.url {
			continue
		}
		if o.service {
			ops = append(ops, fmt.Sprintf(`{"op":"replace","path":"/webhooks/%d/clientConfig/service/path","value":%q}`, o.index, good))
			continue
		}
		fixed := *bad
		fixed.Path = good
		ops = append(ops, fmt.Sprintf(`{"op":"replace","path":"/webhooks/%d/clientConfig/url","value":%q}`, o.index, fixed.String()))
	}
	return fmt.Sprintf("kubectl patch mutatingwebhookconfiguration %s --type=json -p '[%s]'   # its backend answers 404 at %s: istiod serves revision %s's injection at %s, where its other webhooks post",
		e.config, strings.Join(ops, ","), bad.Path, e.revision, good)
}

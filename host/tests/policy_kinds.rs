//! Policy rules may name kinds; discovery on the API server turns them into
//! the resources a webhook configuration carries.

use gantry::policy::binding::{parse_spec, resolve_kinds};
use gantry_apiserver::{ApiServer, Config};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kinds_resolve_to_served_resources_and_unknown_kinds_are_refused() {
    let server = ApiServer::start(Config::default()).await.unwrap();
    let client = server.client();

    let spec = parse_spec(
        "name: k\nrules:\n\
         - {apiGroups: [apps], apiVersions: [v1], kinds: [Deployment, Deployment/scale], operations: [CREATE]}\n\
         - {apiGroups: [''], apiVersions: ['*'], kinds: [Pod], operations: [CREATE]}\n",
    )
    .unwrap();
    let mut rules = spec.rules.clone();
    resolve_kinds(&client, &mut rules).await.unwrap();
    assert_eq!(rules[0].resources, ["deployments", "deployments/scale"]);
    assert_eq!(rules[1].resources, ["pods"]);
    assert!(rules[0].matches("CREATE", "apps", "v1", "deployments", "", true));
    // What goes into the webhook configuration names resources only.
    let written = serde_json::to_value(&rules[0]).unwrap();
    assert!(written.get("kinds").is_none(), "{written}");

    let mut unknown = parse_spec(
        "name: k\nrules:\n- {apiGroups: [apps], apiVersions: [v1], kinds: [Gadget], operations: [CREATE]}\n",
    )
    .unwrap()
    .rules;
    let err = resolve_kinds(&client, &mut unknown).await.unwrap_err();
    assert!(
        err.contains("rules[0].kinds: Gadget is not served"),
        "{err}"
    );
    server.shutdown().await;
}

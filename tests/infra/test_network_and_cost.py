"""The way out of the VPC and what a quiet stage costs, read from the synthesized template."""

from __future__ import annotations

from typing import Any

from racecap_cdk import constants as c

import blueprint
from tests.infra.conftest import TemplateView
from tools.bench import idle_cost

DEFAULT_ROUTE = "0.0.0.0/0"


def _routes_of_subnet(view: TemplateView, subnet: str) -> list[dict[str, Any]]:
    tables = [
        view.ref_target(p["RouteTableId"])
        for _, p in ((lid, view.props(lid)) for lid in view.of_type("AWS::EC2::SubnetRouteTableAssociation"))
        if view.ref_target(p["SubnetId"]) == subnet
    ]
    assert len(tables) == 1, f"subnet {subnet} has {len(tables)} route tables"
    return [
        view.props(lid)
        for lid in view.of_type("AWS::EC2::Route")
        if view.ref_target(view.props(lid)["RouteTableId"]) == tables[0]
    ]


def test_no_nat_gateway_only_nat_instances_with_their_own_way_out(view: TemplateView) -> None:
    # A NAT gateway is ~$33 per AZ-month before any traffic: docs/deploy.md explains the instance.
    assert view.of_type("AWS::EC2::NatGateway") == {}
    instances = view.of_type("AWS::EC2::Instance")
    assert len(instances) == c.NAT_INSTANCES
    for lid, res in instances.items():
        props = res["Properties"]
        assert props["InstanceType"] == c.NAT_INSTANCE_TYPE
        assert props["SourceDestCheck"] is False  # it forwards others' packets
        assert all(m["Ebs"]["Encrypted"] is True for m in props["BlockDeviceMappings"])
        subnet = view.ref_target(props["NetworkInterfaces"][0]["SubnetId"])
        out = [r for r in _routes_of_subnet(view, subnet) if r.get("DestinationCidrBlock") == DEFAULT_ROUTE]
        assert len(out) == 1 and "GatewayId" in out[0], f"{lid} has no internet gateway route"
        assert view.resources[view.ref_target(out[0]["GatewayId"])]["Type"] == "AWS::EC2::InternetGateway"


def test_every_function_reaches_the_internet_through_a_nat_instance(view: TemplateView) -> None:
    nat_instances = set(view.of_type("AWS::EC2::Instance"))
    functions = view.tagged("AWS::Lambda::Function")
    assert set(functions) == {f.id for f in blueprint.FUNCTIONS}
    for fn_id, (_, props) in functions.items():
        for subnet in props["VpcConfig"]["SubnetIds"]:
            out = [
                r
                for r in _routes_of_subnet(view, view.ref_target(subnet))
                if r.get("DestinationCidrBlock") == DEFAULT_ROUTE
            ]
            assert len(out) == 1 and view.ref_target(out[0]["InstanceId"]) in nat_instances, f"{fn_id}: no route out"


def test_the_nat_instance_admits_only_https_from_the_functions(view: TemplateView) -> None:
    nat_groups = {
        view.ref_target(g)
        for res in view.of_type("AWS::EC2::Instance").values()
        for nic in res["Properties"]["NetworkInterfaces"]
        for g in nic["GroupSet"]
    }
    function_groups = {
        view.ref_target(g)
        for _, props in view.tagged("AWS::Lambda::Function").values()
        for g in props["VpcConfig"]["SecurityGroupIds"]
    }
    ingress = [
        p
        for p in (view.props(lid) for lid in view.of_type("AWS::EC2::SecurityGroupIngress"))
        if view.ref_target(p["GroupId"]) in nat_groups
    ]
    inline = [rule for g in nat_groups for rule in view.props(g).get("SecurityGroupIngress", [])]
    assert inline == []  # nothing open to the internet
    assert ingress, "the functions cannot reach the NAT instance"
    for rule in ingress:
        assert (rule["IpProtocol"], rule["FromPort"], rule["ToPort"]) == ("tcp", 443, 443)
        assert view.ref_target(rule["SourceSecurityGroupId"]) in function_groups


def test_the_idle_cost_is_computed_from_the_template_and_within_target(view: TemplateView) -> None:
    budget = idle_cost.report(view.json)
    items = {line["item"] for line in budget["lines"]}
    assert not any(i.startswith("interface endpoint") for i in items)  # the NAT instance replaced them
    assert budget["within_target"], idle_cost.render(budget)
    assert budget["idle_monthly_usd"] == round(sum(line["monthly_usd"] for line in budget["lines"]), 2)


def test_an_unpriced_resource_type_fails_the_budget() -> None:
    import pytest

    template = {"Resources": {"X": {"Type": "AWS::Foo::Bar", "Properties": {}}}}
    with pytest.raises(idle_cost.UnpricedResource):
        idle_cost.idle_budget(template)
    nat_gateway = {"Resources": {"N": {"Type": "AWS::EC2::NatGateway", "Properties": {}}}}
    assert idle_cost.total(idle_cost.idle_budget(nat_gateway)) == 32.85

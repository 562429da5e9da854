"""The two dashboard roles: `viewer` reads, `operator` may act."""

from django.db import migrations


def create_groups(apps, schema_editor):
    group = apps.get_model("auth", "Group")
    for name in ("viewer", "operator"):
        group.objects.get_or_create(name=name)


def drop_groups(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=["viewer", "operator"]).delete()


class Migration(migrations.Migration):
    dependencies = [("auth", "0012_alter_user_first_name_max_length")]
    operations = [migrations.RunPython(create_groups, drop_groups)]

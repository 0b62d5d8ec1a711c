-- not a topology file: --topology reads YAML (cli.topology_lua_file)
return {sips = {count = 4}}

; JavaScript: classes, functions, methods, exported and top-level bindings; calls, new, imports.
(class_declaration name: (identifier) @name.definition.class)
(function_declaration name: (identifier) @name.definition.function)
(generator_function_declaration name: (identifier) @name.definition.function)
(method_definition name: (property_identifier) @name.definition.method)
(program (lexical_declaration (variable_declarator name: (identifier) @name.definition.constant)))
(program (variable_declaration (variable_declarator name: (identifier) @name.definition.constant)))
(export_statement (lexical_declaration (variable_declarator name: (identifier) @name.definition.constant)))
(call_expression function: [(identifier) @name.reference.call
                            (member_expression property: (property_identifier) @name.reference.call)])
(new_expression constructor: (identifier) @name.reference.class)
(import_specifier name: (identifier) @name.reference.import)
(import_clause (identifier) @name.reference.import)
(class_heritage (identifier) @name.reference.class)
